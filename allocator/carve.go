// Carving: the allocating calls. Each validates its arguments, takes the
// lock once, adds what a growing region made usable (grow.go), and takes
// its blocks from the front of free extents: one best-fit run, or the
// smallest fitting extents first.

package allocator

import (
	"slices"

	"github.com/kvalloc/kvalloc/internal/invariants"
)

// Allocate reserves one block of at least size bytes: the smallest free
// extent that holds it, the lowest address among equals. When nothing fits
// the error wraps ErrOutOfMemory and says whether free bytes or contiguity
// were short.
func (a *Allocator) Allocate(size int64) (Block, error) {
	// This is the hot path of single allocations: sizeUnits, openLocked
	// and liveTable.reserve are inlined by hand (each is just over the
	// compiler's inlining budget), so the call costs one lock cycle, the
	// treap walk and, in the common case, one address-table rekey and one
	// live-table insert.
	if size <= 0 || size > a.bytes {
		return Block{}, a.sizeError(size)
	}
	s := (size + a.align - 1) >> (a.shift & 63)
	a.mu.Lock()
	if a.mem == nil || a.closed.Closed() {
		if !a.openSlowLocked() {
			a.mu.Unlock()
			return Block{}, ErrClosed
		}
	}
	a.growLocked()
	id, pred := a.free.bestFit(s)
	if id == 0 {
		err := a.failLocked(s, 1)
		if invariants.Enabled {
			a.checkLocked("Allocate")
		}
		a.mu.Unlock()
		return Block{}, err
	}
	x := &a.free
	n := &x.nodes[id]
	u, rest := n.start, n.size-s
	if rest > 0 && (pred == 0 || keyLess(x.nodes[pred].size, x.nodes[pred].start, rest, u+s)) {
		// takeLocked's common case: the extent gives up its first s
		// units and keeps its place in the treap; only its entry in
		// byStart moves.
		if i := x.byStart.find(u); !x.byStart.clearTail(i) {
			x.byStart.deleteShift(i)
		}
		x.byStart.insertNew(u+s, id)
		n.start, n.size = u+s, rest
		a.freeUnits -= s
		a.usedUnits += s
		a.liveBlocks++
		a.counters.Allocs++
	} else {
		a.takeLocked(id, pred, s, 1)
	}
	if a.live.n >= a.live.max {
		a.live.grow(a.live.n + 1)
	}
	a.gen++
	gen := a.gen
	a.live.insert(u, s, gen)
	a.largestUnits = a.free.largest()
	if invariants.Enabled {
		a.checkLocked("Allocate")
	}
	a.mu.Unlock()
	return Block{Offset: u << a.shift, Size: s << a.shift, Gen: gen}, nil
}

// AllocateBatch reserves n objects of size bytes and returns block i for
// object i. It is all or nothing: on failure nothing changes and the error
// wraps ErrOutOfMemory. n == 0 returns an empty slice.
func (a *Allocator) AllocateBatch(size int64, n int, p Placement) ([]Block, error) {
	return a.AppendBatch(nil, size, n, p)
}

// AppendBatch is AllocateBatch appending to dst, so a caller that reuses dst
// allocates nothing. On failure it returns dst unchanged.
func (a *Allocator) AppendBatch(dst []Block, size int64, n int, p Placement) ([]Block, error) {
	s, err := a.batchUnits(size, n, p, true)
	if err != nil {
		return dst, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if invariants.Enabled {
		defer a.checkLocked("AppendBatch")
	}
	if !a.openLocked() {
		return dst, ErrClosed
	}
	if n == 0 {
		return nonNil(dst), nil
	}
	a.growLocked()
	out, ok := a.placeLocked(dst, s, int64(n), p, false)
	if !ok {
		return dst, a.failLocked(s, int64(n))
	}
	return out, nil
}

// AllocateUpTo reserves the largest k ≤ n objects of size bytes that fit
// now, in one pass and without trial allocations, and returns their blocks
// in object order. For Scattered and ContiguousFirst, k is the exact maximum
// Σ⌊extent/size⌋ over the free extents; for Contiguous it is the most one
// free extent holds. ContiguousFirst places the k objects in one run when
// one extent holds them. Fitting nothing returns an empty slice; it errs
// only on invalid arguments.
func (a *Allocator) AllocateUpTo(size int64, n int, p Placement) ([]Block, error) {
	return a.AppendUpTo(nil, size, n, p)
}

// AppendUpTo is AllocateUpTo appending to dst.
func (a *Allocator) AppendUpTo(dst []Block, size int64, n int, p Placement) ([]Block, error) {
	s, err := a.batchUnits(size, n, p, false)
	if err != nil {
		return dst, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if invariants.Enabled {
		defer a.checkLocked("AppendUpTo")
	}
	if !a.openLocked() {
		return dst, ErrClosed
	}
	a.growLocked()
	var k int64
	if p == Contiguous {
		k = min(int64(n), a.largestUnits/s)
	} else {
		k = a.free.slots(s, int64(n))
	}
	if k < int64(n) {
		a.counters.PartialGrants++
	}
	if k == 0 {
		return nonNil(dst), nil
	}
	dst, _ = a.placeLocked(dst, s, k, p, true)
	return dst, nil
}

// placeLocked places k > 0 objects of s units as p says and appends their
// blocks to dst: one run from the best-fit extent when p allows one and an
// extent holds it, else over the free extents, smallest fitting first. It
// reports false, changing nothing, when they do not fit so: a Contiguous
// run no extent holds, or fewer than k slots in all. fits says the caller
// has counted the slots already (AppendUpTo), so they are not counted
// again.
func (a *Allocator) placeLocked(dst []Block, s, k int64, p Placement, fits bool) ([]Block, bool) {
	run, pred := int32(0), int32(0)
	if p != Scattered {
		run, pred = a.free.bestFit(s * k)
	}
	switch {
	case run != 0:
		a.live.reserve(int(k))
		dst = a.carveLocked(run, pred, s, k, grow(dst, int(k)))
	case p == Contiguous || !fits && a.free.slots(s, k) < k:
		return dst, false
	default:
		a.live.reserve(int(k))
		dst = a.scatterLocked(s, k, grow(dst, int(k)))
	}
	a.largestUnits = a.free.largest()
	return dst, true
}

// Fit reports how many objects of size bytes, up to n, AllocateUpTo with
// Scattered or ContiguousFirst placement would grant now. It allocates
// nothing and visits only free extents of at least size bytes, largest
// first, stopping at n. Invalid arguments give 0.
func (a *Allocator) Fit(size int64, n int) int {
	s, err := a.batchUnits(size, n, Scattered, false)
	if err != nil || n == 0 {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.openLocked() {
		return 0
	}
	a.growLocked()
	return int(a.free.slots(s, int64(n)))
}

// takeLocked removes k objects of s units from the front of free extent id,
// whose in-order predecessor in the size treap is pred, and accounts for
// them; it returns the first unit taken. In the common case the extent
// keeps its place in the treap (its new key still lies above pred's), so
// the only other change is its first unit's entry in byStart.
func (a *Allocator) takeLocked(id, pred int32, s, k int64) int64 {
	x := &a.free
	n := &x.nodes[id]
	u, take := n.start, s*k
	if rest := n.size - take; rest > 0 && (pred == 0 || keyLess(x.nodes[pred].size, x.nodes[pred].start, rest, u+take)) {
		if i := x.byStart.find(u); !x.byStart.clearTail(i) {
			x.byStart.deleteShift(i)
		}
		x.byStart.insertNew(u+take, id)
		n.start, n.size = u+take, rest
	} else if rest > 0 {
		x.shrink(id, pred, u+take, rest)
	} else {
		x.remove(id)
	}
	a.freeUnits -= take
	a.usedUnits += take
	a.liveBlocks += k
	a.counters.Allocs += uint64(k)
	return u
}

// carveLocked takes k objects of s units from the front of free extent id
// (pred: its predecessor, from bestFit), records them live and appends
// their blocks to dst. One table insert and one append per block are the
// whole per-block cost of a batch; the caller has reserved room in the
// table.
func (a *Allocator) carveLocked(id, pred int32, s, k int64, dst []Block) []Block {
	start := a.takeLocked(id, pred, s, k)
	bs, gen, shift := s<<a.shift, a.gen, a.shift
	n := len(dst)
	dst = slices.Grow(dst, int(k))[:n+int(k)]
	a.live.insertRun(start, s, int(k), gen)
	a.gen = gen + uint64(k)
	for i := range dst[n:] {
		dst[n+i] = Block{Offset: (start + int64(i)*s) << shift, Size: bs, Gen: gen + uint64(i) + 1}
	}
	return dst
}

// scatterLocked takes k objects of s units, smallest fitting extent first,
// carving as many as each holds. The caller has checked that k fit.
func (a *Allocator) scatterLocked(s, k int64, dst []Block) []Block {
	for k > 0 {
		id, pred := a.free.bestFit(s)
		take := min(k, a.free.nodes[id].size/s)
		dst = a.carveLocked(id, pred, s, take, dst)
		k -= take
	}
	return dst
}

// failLocked records a failed allocation of k objects of s units and
// returns its error, which names the cause. The error is a noSpaceError:
// its message is formatted only when read, so a caller that only tests
// errors.Is(err, ErrOutOfMemory), as on-demand eviction does on every
// batch that does not fit, pays for one small allocation, not for fmt.
func (a *Allocator) failLocked(s, k int64) error {
	e := &noSpaceError{k: k, size: s << a.shift, free: a.freeUnits << a.shift}
	if a.freeUnits < s*k {
		a.counters.FailedNoSpace++
		return e
	}
	a.counters.FailedFragmented++
	e.fragmented, e.largest, e.extents = true, a.largestUnits<<a.shift, a.free.len()
	return e
}

func grow(dst []Block, n int) []Block {
	if cap(dst)-len(dst) < n {
		d := make([]Block, len(dst), len(dst)+n)
		copy(d, dst)
		dst = d
	}
	return dst
}

func nonNil(dst []Block) []Block {
	if dst == nil {
		return []Block{}
	}
	return dst
}
