package allocator

import "math/bits"

// liveTable maps the first unit of every live block to its size and
// generation: the allocator's whole record of live blocks. It is an
// open-addressing table with linear probing, Fibonacci hashing and
// backward-shift deletion, like addrTable, sized to the live blocks (load
// factor at most ¾), not to the capacity: an allocator over 1 TiB that
// holds 5700 blocks keeps an 8192-slot table (192 KiB) whatever the pool.
//
// The load factor is ¾ rather than addrTable's ½ because the table's first
// growth is paid inside a batch: a fresh allocator's first batch of 5700
// faults in the table's pages, and halving them cut that batch from 2.6×
// to 1.6× a warm one, while a warm batch's inserts cost the same (profiles
// in MEMORY.md).
//
// A slot's key is the start unit plus one, so the zero value of a slot is
// empty and a freshly made table needs no initialising pass.
type liveTable struct {
	slots []liveSlot
	n     int
	max   int  // the most blocks within the load factor: ¾ len(slots)
	shift uint // 64 - log2(len(slots))
}

// liveSlot is one live block: key = first unit + 1 (0: empty), its size in
// units and its generation.
type liveSlot struct {
	key  int64
	size int64
	gen  uint64
}

// liveTableMin is the smallest table: 16 slots, 384 bytes.
const liveTableMin = 16

func newLiveTable() liveTable {
	t := liveTable{}
	t.resize(liveTableMin)
	return t
}

func (t *liveTable) resize(size int) {
	old := t.slots
	t.slots = make([]liveSlot, size)
	t.max = size / 4 * 3
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	mask := size - 1
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := t.home(s.key)
		for t.slots[i].key != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// reserve grows the table, once, so that k more blocks fit within the load
// factor: a batch of k blocks rehashes at most once.
func (t *liveTable) reserve(k int) {
	if t.n+k > t.max {
		t.grow(t.n + k)
	}
}

// grow doubles the table until need blocks fit within the load factor.
func (t *liveTable) grow(need int) {
	size := len(t.slots)
	for 4*need > 3*size {
		size *= 2
	}
	t.resize(size)
}

func (t *liveTable) home(key int64) int {
	return int((uint64(key) * 0x9E3779B97F4A7C15) >> (t.shift & 63))
}

// insert records a live block at unit u. u must not be live; the caller
// has reserved room.
func (t *liveTable) insert(u, size int64, gen uint64) {
	key := u + 1
	mask := len(t.slots) - 1
	i := t.home(key)
	for t.slots[i].key != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = liveSlot{key: key, size: size, gen: gen}
	t.n++
}

// insertRun records k live blocks of size units, one after another from
// unit u, with generations gen+1, gen+2, and so on: a carved batch. None
// of them may be live; the caller has reserved room. It is insert written
// as one loop over locals, like takeEach.
func (t *liveTable) insertRun(u, size int64, k int, gen uint64) {
	slots, hs := t.slots, t.shift&63
	mask := len(slots) - 1
	key := u + 1
	for range k {
		gen++
		i := int((uint64(key) * 0x9E3779B97F4A7C15) >> hs)
		for slots[i&mask].key != 0 {
			i++
		}
		slots[i&mask] = liveSlot{key: key, size: size, gen: gen}
		key += size
	}
	t.n += k
}

// find returns the slot of the live block at unit u, or -1.
func (t *liveTable) find(u int64) int {
	key := u + 1
	mask := len(t.slots) - 1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch t.slots[i].key {
		case key:
			return i
		case 0:
			return -1
		}
	}
}

// deleteAt empties slot i.
func (t *liveTable) deleteAt(i int) {
	if !t.clearTail(i) {
		t.deleteShift(i)
	}
}

// clearTail empties slot i and reports true when the next slot is empty:
// nothing follows in the probe chain, so no entry has to move back.
// Otherwise it changes nothing and reports false, and deleteShift must
// close the gap. Hot paths call it directly, because it inlines and
// deleteAt does not.
func (t *liveTable) clearTail(i int) bool {
	if t.slots[(i+1)&(len(t.slots)-1)].key != 0 {
		return false
	}
	t.slots[i].key = 0
	t.n--
	return true
}

// deleteShift empties slot i, shifting later entries of its probe chain
// back so that lookups never need tombstones.
func (t *liveTable) deleteShift(i int) {
	mask := len(t.slots) - 1
	for j := i; ; {
		t.slots[i].key = 0
		for {
			j = (j + 1) & mask
			if t.slots[j].key == 0 {
				t.n--
				return
			}
			// The entry at j may move to the hole at i unless its home
			// lies cyclically in (i, j].
			h := t.home(t.slots[j].key)
			if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
				break
			}
		}
		t.slots[i] = t.slots[j]
		i = j
	}
}

// tomb marks a slot whose block a bulk Free has taken out (see kill). It
// never outlives the call: purge empties every tomb before Free returns.
const tomb = -1

// kill takes the entry in slot i out by marking it a tomb: O(1), with none
// of deleteShift's walk along the probe chain. Lookups step over a tomb as
// over any other key, so the chains stay intact and a block repeated in
// the call finds nothing. The table holds tombs only until purge, which
// must run before any insert. takeEach does the same for each block of a
// bulk Free, inline.
func (t *liveTable) kill(i int) {
	t.slots[i].key = tomb
	t.n--
}

// bulk reports whether a Free of k blocks should kill and purge rather
// than delete one by one: purge costs one pass over the slots, cheaper
// than k backward-shift deletions (about 5 ns each at load ¾, MEMORY.md)
// once k is an eighth of the slots.
func (t *liveTable) bulk(k int) bool { return 8*k >= len(t.slots) }

// purge empties every tomb. With no live entry left it clears the table;
// otherwise one pass, starting after an empty slot, moves each live entry
// back to the first empty slot from its home. An entry only moves back,
// and every slot behind the pass holds its final entry, so each entry ends
// reachable from its home with no empty slot between: the invariant that
// find relies on, as after deleteShift.
func (t *liveTable) purge() {
	if t.n == 0 {
		clear(t.slots)
		return
	}
	mask := len(t.slots) - 1
	e := 0 // an empty slot: the load factor leaves one
	for t.slots[e].key != 0 {
		e++
	}
	for k := 1; k < len(t.slots); k++ {
		j := (e + k) & mask
		switch key := t.slots[j].key; key {
		case 0:
		case tomb:
			t.slots[j].key = 0
		default:
			i := t.home(key)
			for i != j && t.slots[i].key != 0 {
				i = (i + 1) & mask
			}
			if i != j {
				t.slots[i] = t.slots[j]
				t.slots[j].key = 0
			}
		}
	}
}

// takeEach takes the live entries of blocks out of the table in order,
// as tombs when bulk (kill) and by deletion otherwise, and returns
// len(blocks); or it stops at the first block that is not a live block
// of an allocator of capacity bytes, alignment mask+1 and unit 1<<shift
// (out of range, misaligned, not live, or live with another size or
// generation) and returns its index, with the entries of the blocks
// before it taken out. It is Free's phase 1, the whole per-block cost of
// a bulk Free, written as one loop over locals: the table's fields and
// the live count stay in registers rather than being reloaded and stored
// through t on every block, as they are when each block calls find and
// kill.
func (t *liveTable) takeEach(blocks []Block, shift uint, capacity, mask int64, bulk bool) int {
	slots, hs, taken := t.slots, t.shift&63, 0
	smask := len(slots) - 1
	defer func() { t.n -= taken }()
	for i := range blocks {
		b := &blocks[i]
		off, size := b.Offset, b.Size
		if size <= 0 || off < 0 || off > capacity || size > capacity-off || (off|size)&mask != 0 {
			return i
		}
		key := off>>shift + 1
		j := int((uint64(key) * 0x9E3779B97F4A7C15) >> hs)
		for {
			k := slots[j&smask].key
			if k == key {
				break
			}
			if k == 0 {
				return i
			}
			j++
		}
		j &= smask
		if e := &slots[j]; e.size != size>>shift || e.gen != b.Gen {
			return i
		}
		if bulk {
			slots[j].key = tomb
			taken++
		} else {
			t.n -= taken
			taken = 0
			t.deleteAt(j)
		}
	}
	return len(blocks)
}

// each calls f for every live block, in no particular order.
func (t *liveTable) each(f func(u, size int64, gen uint64)) {
	for _, s := range t.slots {
		if s.key != 0 {
			f(s.key-1, s.size, s.gen)
		}
	}
}
