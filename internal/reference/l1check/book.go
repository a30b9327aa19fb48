package l1check

import (
	"slices"

	"github.com/kvalloc/kvalloc/l1"
)

// Book holds the leases each actor got: the write lease of each key it
// reserved and the read lease of each key it read-locked, the last ones it
// got. An actor presents them as they are, so after a lapse, or after
// another actor locked the key, they are stale.
type Book struct {
	Write, Read map[actorKey]l1.Lease
	// Writes is every write lease each actor got, by actor, in order, the
	// ones Write no longer holds included: what a node pool's owner
	// records per connection, and aborts when the connection ends.
	Writes [Actors][]KeyLease
}

// KeyLease is a key and a lease an actor got for it.
type KeyLease struct {
	Key   Key
	Lease l1.Lease
}

type actorKey struct {
	Actor int
	Key   Key
}

// NewBook returns an empty Book.
func NewBook() *Book {
	return &Book{Write: map[actorKey]l1.Lease{}, Read: map[actorKey]l1.Lease{}}
}

// Clone returns an independent copy.
func (b *Book) Clone() *Book {
	c := NewBook()
	for k, v := range b.Write {
		c.Write[k] = v
	}
	for k, v := range b.Read {
		c.Read[k] = v
	}
	for i, w := range b.Writes {
		c.Writes[i] = slices.Clone(w)
	}
	return c
}

// Leases returns the leases op presents: for the finishing calls, per its
// LeaseMode; nil for every other kind.
func (b *Book) Leases(op Op) []l1.Lease {
	var book map[actorKey]l1.Lease
	switch op.Kind {
	case OpFinishWrite, OpFinishWriteAndReserveRead, OpAbortWrite:
		book = b.Write
	case OpFinishRead:
		book = b.Read
	default:
		return nil
	}
	out := make([]l1.Lease, len(op.Keys))
	switch op.Lease {
	case LeaseZero:
	case LeaseShort:
		if len(out) == 0 {
			return []l1.Lease{0} // one too many is as wrong as one too few
		}
		out = out[:len(out)-1]
		fallthrough
	default:
		for i := range out {
			out[i] = book[actorKey{op.Actor, op.Keys[i]}]
		}
	}
	return out
}

// Record keeps the leases op's answer handed to its actor: write leases
// from ReserveWrite, read leases from ReserveRead and
// FinishWriteAndReserveRead.
func (b *Book) Record(op Op, res []l1.Result, err error) {
	if err != nil {
		return
	}
	book := b.Read
	if op.Kind == OpReserveWrite {
		book = b.Write
	}
	for i, r := range res {
		if r.Status == l1.OK {
			book[actorKey{op.Actor, op.Keys[i]}] = r.Lease
			if op.Kind == OpReserveWrite {
				b.Writes[op.Actor] = append(b.Writes[op.Actor], KeyLease{op.Keys[i], r.Lease})
			}
		}
	}
}
