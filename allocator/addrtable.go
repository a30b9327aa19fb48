package allocator

import "math/bits"

// addrTable maps a unit offset to a free-extent node: the address half of
// the free-extent index. It is an open-addressing table with linear probing,
// Fibonacci hashing and backward-shift deletion, so it never accumulates
// tombstones and never allocates once grown. Go's built-in map costs 3-5×
// more per operation here (seeded hashing, tombstone bookkeeping) and was
// most of the cost of a single Allocate+Free.
type addrTable struct {
	keys  []int64 // emptyKey marks a free slot
	vals  []int32
	n     int
	shift uint // 64 - log2(len(keys))
}

const emptyKey = -1

func newAddrTable() addrTable {
	t := addrTable{}
	t.resize(16)
	return t
}

func (t *addrTable) resize(size int) {
	old, oldVals := t.keys, t.vals
	t.keys = make([]int64, size)
	t.vals = make([]int32, size)
	for i := range t.keys {
		t.keys[i] = emptyKey
	}
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
	for i, k := range old {
		if k != emptyKey {
			t.insertNew(k, oldVals[i])
		}
	}
}

func (t *addrTable) home(k int64) int {
	return int((uint64(k) * 0x9E3779B97F4A7C15) >> (t.shift & 63))
}

// get returns the node for unit k.
func (t *addrTable) get(k int64) (int32, bool) {
	if i := t.find(k); i >= 0 {
		return t.vals[i], true
	}
	return 0, false
}

// find returns the slot of unit k, or -1.
func (t *addrTable) find(k int64) int {
	mask := len(t.keys) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return i
		case emptyKey:
			return -1
		}
	}
}

// put sets the node for unit k.
func (t *addrTable) put(k int64, v int32) {
	if i := t.find(k); i >= 0 {
		t.vals[i] = v
		return
	}
	if 2*(t.n+1) > len(t.keys) {
		t.resize(2 * len(t.keys))
	}
	t.insertNew(k, v)
}

// insertNew adds unit k, which is absent, with node v. The caller has made
// sure the table has room within its load factor. Small enough to inline.
func (t *addrTable) insertNew(k int64, v int32) {
	mask := len(t.keys) - 1
	i := t.home(k)
	for t.keys[i] != emptyKey {
		i = (i + 1) & mask
	}
	t.keys[i], t.vals[i] = k, v
	t.n++
}

// del removes unit k if present.
func (t *addrTable) del(k int64) {
	if i := t.find(k); i >= 0 {
		t.deleteAt(i)
	}
}

// rekey moves the entry of unit old, which must be present, to unit new,
// which must be absent, with value v: an extent whose first or end unit
// moved. It never resizes: the count does not change.
func (t *addrTable) rekey(old, new int64, v int32) {
	i := t.find(old)
	if i < 0 {
		panic("allocator: address table lost an extent")
	}
	t.deleteAt(i)
	t.insertNew(new, v)
}

// deleteAt empties slot i.
func (t *addrTable) deleteAt(i int) {
	if !t.clearTail(i) {
		t.deleteShift(i)
	}
}

// clearTail empties slot i and reports true when the next slot is empty,
// as it mostly is at a load factor of at most ½: nothing follows in the
// probe chain, so no entry has to move back. Otherwise it changes nothing
// and reports false, and deleteShift must close the gap. Hot paths call it
// directly, because it inlines and deleteAt does not.
func (t *addrTable) clearTail(i int) bool {
	if t.keys[(i+1)&(len(t.keys)-1)] != emptyKey {
		return false
	}
	t.keys[i] = emptyKey
	t.n--
	return true
}

// deleteShift empties slot i, shifting later entries of its probe chain
// back so that lookups never need tombstones.
func (t *addrTable) deleteShift(i int) {
	mask := len(t.keys) - 1
	for j := i; ; {
		t.keys[i] = emptyKey
		for {
			j = (j + 1) & mask
			if t.keys[j] == emptyKey {
				t.n--
				return
			}
			// The entry at j may move to the hole at i unless its home
			// lies cyclically in (i, j].
			h := t.home(t.keys[j])
			if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
				break
			}
		}
		t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
		i = j
	}
}

// each calls f for every entry, in no particular order.
func (t *addrTable) each(f func(k int64, v int32)) {
	for i, k := range t.keys {
		if k != emptyKey {
			f(k, t.vals[i])
		}
	}
}
