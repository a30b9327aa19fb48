package l1

import "hash/maphash"

// Object records and the key index.
//
// The manager's records live in a store: chunks of recordChunk records,
// allocated as needed and never moved, so a *object stays valid for as long
// as its object lives. A record is also named by its number, an int32, and
// numbers are what the LRU list, the expiry queues and the index hold. So
// the links hold no pointers (relinking an object costs the garbage
// collector no write barrier) and the index is a pointer-free array that
// the collector never scans. The record of a removed object is zeroed and
// reused, so a store keeps as many records as the manager ever held objects
// at once, as a Go map keeps its buckets.
//
// The index is an open-addressing hash table with linear probing, at most
// half full. Each slot holds 32 bits of its key's hash and its record's
// number; the record keeps the same 32 bits. A call hashes each key it names
// once (hash/maphash.Comparable, the hash Go's maps use), and the lookup
// tells where a missing key goes, so inserting it costs no second hash;
// removing an object finds its slot from the hash in its record, without
// hashing the key again. Deletion shifts the rest of the probe run back
// (Knuth's algorithm R), so no tombstones build up.

// recordChunk is the number of records allocated at once.
const (
	recordShift = 8
	recordChunk = 1 << recordShift
)

// slot is one entry of the index: rec 0 marks an empty slot.
type slot struct {
	hash uint32
	rec  int32
}

// store holds the records and the index from keys to records. Record 0 is
// never used: number 0 means none.
type store[K comparable] struct {
	chunks [][]object[K]
	free   int32 // first reusable record, linked through lruLinks.next; 0 if none
	seed   maphash.Seed
	slots  []slot // len is 0 or a power of two
	n      int    // keys in the index
}

func (s *store[K]) init() { s.seed = maphash.MakeSeed() }

// rec returns record i, which must not be 0.
func (s *store[K]) rec(i int32) *object[K] {
	return &s.chunks[i>>recordShift][i&(recordChunk-1)]
}

// hash returns the 32 bits of key's hash that the index uses.
func (s *store[K]) hash(key K) uint32 { return uint32(maphash.Comparable(s.seed, key)) }

// hash64 returns key's whole hash, for S3-FIFO's ghost queue (policy.go).
func (s *store[K]) hash64(key K) uint64 { return maphash.Comparable(s.seed, key) }

// find returns key's record, or nil and the slot where key would go.
func (s *store[K]) find(key K, h uint32) (*object[K], int) {
	if len(s.slots) == 0 {
		return nil, -1
	}
	mask := uint32(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := s.slots[i]
		if sl.rec == 0 {
			return nil, int(i)
		}
		if sl.hash == h {
			if o := s.rec(sl.rec); o.key == key {
				return o, int(i)
			}
		}
	}
}

// insert indexes o, whose key and hash are set and whose key is not in the
// index; pos is where find said the key would go.
func (s *store[K]) insert(o *object[K], pos int) {
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
		pos = s.emptySlot(o.hash)
	}
	s.slots[pos] = slot{hash: o.hash, rec: o.idx}
	s.n++
}

// emptySlot returns the first empty slot of h's probe sequence.
func (s *store[K]) emptySlot(h uint32) int {
	mask := uint32(len(s.slots) - 1)
	i := h & mask
	for s.slots[i].rec != 0 {
		i = (i + 1) & mask
	}
	return int(i)
}

// grow doubles the index.
func (s *store[K]) grow() {
	old := s.slots
	s.slots = make([]slot, max(16, 2*len(old)))
	for _, sl := range old {
		if sl.rec != 0 {
			s.slots[s.emptySlot(sl.hash)] = sl
		}
	}
}

// remove takes o out of the index.
func (s *store[K]) remove(o *object[K]) {
	mask := uint32(len(s.slots) - 1)
	i := o.hash & mask
	for s.slots[i].rec != o.idx {
		i = (i + 1) & mask
	}
	// Fill the hole from later in the probe run: a slot may move back to i
	// unless its home lies cyclically in (i, j].
	for j := i; ; {
		j = (j + 1) & mask
		sl := s.slots[j]
		if sl.rec == 0 {
			break
		}
		if home := sl.hash & mask; (j-home)&mask >= (j-i)&mask {
			s.slots[i] = sl
			i = j
		}
	}
	s.slots[i] = slot{}
	s.n--
}

// alloc returns a zeroed record, not indexed.
func (s *store[K]) alloc() *object[K] {
	if s.free == 0 {
		base := int32(len(s.chunks)) << recordShift
		chunk := make([]object[K], recordChunk)
		s.chunks = append(s.chunks, chunk)
		first := int32(0)
		if base == 0 {
			first = 1 // record 0 is never used
		}
		for i := int32(recordChunk - 1); i >= first; i-- {
			chunk[i].idx = base + i
			chunk[i].lruLinks.next = s.free
			s.free = base + i
		}
	}
	o := s.rec(s.free)
	s.free = o.lruLinks.next
	o.lruLinks.next = 0
	return o
}

// release zeroes o, which must be out of the index and of every list, for
// reuse.
func (s *store[K]) release(o *object[K]) {
	*o = object[K]{idx: o.idx}
	o.lruLinks.next = s.free
	s.free = o.idx
}

// reset drops every record and the index.
func (s *store[K]) reset() {
	s.chunks, s.free, s.slots, s.n = nil, 0, nil, 0
}
