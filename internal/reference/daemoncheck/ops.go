//go:build linux

package daemoncheck

import (
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// OpKind names a call on a connection, a clock advance, or a disconnect.
type OpKind uint8

// The operations.
const (
	OpReserveWrite OpKind = iota
	OpFinishWrite
	OpAbortWrite
	OpFinishWriteAndReserveRead
	OpReserveRead
	OpReserveReadPrefix
	OpFinishRead
	OpDelete
	OpTouch
	OpAdvance
	OpDisconnect
	// NumBaseOpKinds is the number of operations of a System without L2;
	// the ones below need Setup.L2.
	NumBaseOpKinds OpKind = iota
)

// The operations of a System with Setup.L2.
const (
	// OpLookup is a lookup of the keys, with the prefetch flag when
	// Op.Prefetch.
	OpLookup OpKind = NumBaseOpKinds + iota
	// OpLoad lets the oldest prefetch's get through and waits for its
	// load; nothing without one.
	OpLoad
	// OpEvictL2 removes the keys' values from L2, as the store's own
	// eviction would.
	OpEvictL2
	NumOpKinds
)

var opNames = [...]string{"ReserveWrite", "FinishWrite", "AbortWrite", "FinishWriteAndReserveRead", "ReserveRead",
	"ReserveReadPrefix", "FinishRead", "Delete", "Touch", "Advance", "Disconnect", "Lookup", "Load", "EvictL2"}

func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// LeaseFrom says whose leases a finishing call presents.
type LeaseFrom uint8

const (
	// LeaseOwn: the connection's own last lease of each key (0 where it
	// has none), what an honest, possibly late, holder presents.
	LeaseOwn LeaseFrom = iota
	// LeaseOther: the next connection's: another client's lease.
	LeaseOther
	// LeaseZero: 0, never a lease.
	LeaseZero
	// LeaseDaemon: the daemon's own write lease of each key, where it is
	// prefetching it (0 elsewhere): a lease no connection holds. For a
	// System with Setup.L2.
	LeaseDaemon
)

// Op is one step.
type Op struct {
	Kind      OpKind
	Conn      int // 0 to Conns-1
	Keys      []int
	Size      int64
	Mode      l1.Mode
	Temporary []bool
	Positions []uint32
	Locks     int
	Force     bool
	From      LeaseFrom
	Advance   time.Duration
	Prefetch  bool // OpLookup
}

func (o Op) String() string {
	switch o.Kind {
	case OpAdvance:
		return fmt.Sprintf("Advance(%v)", o.Advance)
	case OpLookup:
		return fmt.Sprintf("conn %d: Lookup(%v, prefetch %v)", o.Conn, o.Keys, o.Prefetch)
	case OpLoad:
		return "Load"
	case OpEvictL2:
		return fmt.Sprintf("EvictL2(%v)", o.Keys)
	case OpDisconnect:
		return fmt.Sprintf("Disconnect(conn %d)", o.Conn)
	case OpReserveWrite:
		return fmt.Sprintf("conn %d: ReserveWrite(%v, size %d, %v, temp %v, pos %v)", o.Conn, o.Keys, o.Size, o.Mode, o.Temporary, o.Positions)
	}
	return fmt.Sprintf("conn %d: %v(%v, locks %d, force %v, leases %d)", o.Conn, o.Kind, o.Keys, o.Locks, o.Force, o.From)
}

// leases returns the leases op presents, for the client and the model.
func (s *System) leases(op Op, write bool) ([]client.Lease, []l1.Lease) {
	from := op.Conn
	if op.From == LeaseOther {
		from = (op.Conn + 1) % Conns
	}
	book := s.Book[from].Read
	if write {
		book = s.Book[from].Write
	}
	epoch := s.Clients[op.Conn].Epoch()
	cl := make([]client.Lease, len(op.Keys))
	ml := make([]l1.Lease, len(op.Keys))
	for i, k := range op.Keys {
		if op.From == LeaseDaemon {
			l, _ := s.Model.DaemonWriteLease(k)
			cl[i], ml[i] = client.Lease{Epoch: epoch, ID: l}, l
			continue
		}
		if op.From != LeaseZero {
			cl[i] = client.Lease{Epoch: epoch, ID: book[k]}
			ml[i] = book[k]
		} else {
			cl[i].Epoch = epoch
		}
	}
	return cl, ml
}

// record keeps the leases a call handed out.
func (s *System) record(op Op, res []client.Result, write bool) {
	book := s.Book[op.Conn].Read
	if write {
		book = s.Book[op.Conn].Write
	}
	for i, r := range res {
		if r.Status == 0 {
			book[op.Keys[i]] = r.Lease.ID
		}
	}
}

// Run applies ops in turn and returns the first difference.
func (s *System) Run(ops []Op) error {
	for i, op := range ops {
		if err := s.Apply(op); err != nil {
			return fmt.Errorf("op %d of %d, %v: %w", i+1, len(ops), op, err)
		}
	}
	return nil
}

// Apply runs op on the daemon and on the model, compares the answers,
// waits until the daemon's L2 tier (with Setup.L2) has done what the op
// gave it to do, then compares every object's state.
func (s *System) Apply(op Op) error {
	if err := s.apply(op); err != nil {
		return err
	}
	if err := s.waitL2(); err != nil {
		return err
	}
	return s.Compare()
}

func (s *System) apply(op Op) error {
	c := s.Clients[op.Conn]
	md := s.Model
	mm := md.M
	keys := keysOf(op.Keys)
	switch op.Kind {
	case OpAdvance:
		s.Advance(op.Advance)
		return nil
	case OpDisconnect:
		return s.Disconnect(op.Conn)
	case OpReserveWrite:
		got, err := c.ReserveWriteChain(keys, op.Positions, op.Temporary, op.Size, op.Mode)
		want, wantErr := md.ReserveWriteChain(op.Conn, op.Keys, op.Positions, op.Temporary, op.Size, op.Mode)
		if e := sameErr(err, wantErr); e != nil || err != nil {
			return e
		}
		s.record(op, got, true)
		if err := s.notHeld(got); err != nil {
			return err
		}
		return sameResults(got, want)
	case OpFinishWrite, OpAbortWrite:
		cl, ml := s.leases(op, true)
		call, model := c.FinishWrite, md.FinishWrite
		if op.Kind == OpAbortWrite {
			call, model = c.AbortWrite, md.AbortWrite
		}
		got, err := call(keys, cl)
		want, wantErr := model(op.Conn, op.Keys, ml)
		if e := sameErr(err, wantErr); e != nil || err != nil {
			return e
		}
		return sameStatuses(got, want)
	case OpFinishWriteAndReserveRead:
		cl, ml := s.leases(op, true)
		got, err := c.FinishWriteAndReserveRead(keys, cl, op.Locks)
		want, wantErr := md.FinishWriteAndReserveRead(op.Conn, op.Keys, ml, op.Locks)
		if e := sameErr(err, wantErr); e != nil || err != nil {
			return e
		}
		s.record(op, got, false)
		return sameResults(got, want)
	case OpReserveRead:
		got, err := c.ReserveRead(keys, op.Locks)
		want, wantErr := md.ReserveRead(op.Conn, op.Keys, op.Locks)
		if e := sameErr(err, wantErr); e != nil || err != nil {
			return e
		}
		s.record(op, got, false)
		return sameResults(got, want)
	case OpReserveReadPrefix:
		got, n, err := c.ReserveReadPrefix(keys, op.Locks)
		want, wantN, wantErr := md.ReserveReadPrefix(op.Conn, op.Keys, op.Locks)
		if e := sameErr(err, wantErr); e != nil || err != nil {
			return e
		}
		if n != wantN {
			return fmt.Errorf("prefix of %d, model %d", n, wantN)
		}
		s.record(op, got, false)
		return sameResults(got, want)
	case OpFinishRead:
		cl, ml := s.leases(op, false)
		got, err := c.FinishRead(keys, cl, op.Locks)
		want, wantErr := md.FinishRead(op.Conn, op.Keys, ml, op.Locks)
		if e := sameErr(err, wantErr); e != nil || err != nil {
			return e
		}
		return sameStatuses(got, want)
	case OpDelete:
		del := c.Delete
		if s.v.Delete != nil {
			del = func(keys []l1.ObjectKey, force bool) ([]wire.Status, error) {
				return s.v.Delete(s, op.Conn, keys, force)
			}
		}
		got, err := del(keys, op.Force)
		want, wantErr := mm.Delete(op.Keys, op.Force)
		if e := sameErr(err, wantErr); e != nil || err != nil {
			return e
		}
		return sameStatuses(got, want)
	case OpTouch:
		return sameErr(c.Touch(keys), mm.Touch(op.Keys))
	case OpLookup, OpLoad, OpEvictL2:
		return s.applyL2(op)
	}
	return fmt.Errorf("unknown op %v", op.Kind)
}
