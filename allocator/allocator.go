package allocator

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// DefaultAlign is the block alignment when Options.Align is 0: one 4 KiB
// page, LMCache's default, and the granularity cudaHostRegister requires.
const DefaultAlign = 4096

// Options configures New.
type Options struct {
	// Align is the block alignment in bytes, relative to the start of the
	// region: a power of two. 0 means DefaultAlign. Every block's offset and
	// size are multiples of it.
	Align int64
}

// Allocator carves one Region into blocks. It is safe for concurrent use;
// every call takes one mutex once, a batch included.
type Allocator struct {
	mu     sync.Mutex
	region Region
	mem    []byte // nil once closed
	align  int64
	shift  uint  // log2(align)
	units  int64 // capacity in alignment units
	bytes  int64 // capacity in bytes: units << shift

	// Live blocks, keyed by first unit, with their size and generation
	// (livetable.go); free space, indexed by address and by size
	// (extents.go).
	live liveTable
	free extentIndex
	gen  uint64 // the generation of the last block handed out

	freeUnits, usedUnits, liveBlocks int64
	largestUnits                     int64 // cached after every change, so Stats is O(1)
	counters                         Counters
	runs, runsTmp                    []freeRun // Free's scratch, reused
	growth                           growth    // over a GrowingRegion: the ranges added so far (grow.go)

	key    uintptr      // the region's first byte, claimed in the owners table
	dead   atomic.Bool  // set with mem = nil, read without the lock by claimRegion
	closed *atomic.Bool // set when the region is closed; nil for a foreign region
}

// New returns an allocator over r. The allocator owns r from then on and
// closes it in Close. Only whole alignment units of r are used: a tail
// shorter than Align is never handed out.
//
// A region belongs to one allocator: New over memory that a live allocator
// already carves (the same region, or another Region over the same first
// byte) is an error wrapping ErrInvalidArgument. Once that allocator is
// closed, or its region is, the memory may be given to a new one. New
// touches no memory in proportion to the capacity: its metadata starts at
// a few hundred bytes and grows with the live blocks and free extents.
func New(r Region, opts Options) (*Allocator, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: nil region", ErrInvalidArgument)
	}
	align := opts.Align
	if align == 0 {
		align = DefaultAlign
	}
	if align < 0 || align&(align-1) != 0 {
		return nil, fmt.Errorf("%w: alignment %d is not a power of two", ErrInvalidArgument, opts.Align)
	}
	mem := r.Bytes()
	if mem == nil {
		return nil, fmt.Errorf("%w: region is closed", ErrClosed)
	}
	units := int64(len(mem)) / align
	if units == 0 {
		return nil, fmt.Errorf("%w: region of %d bytes holds no %d-byte unit", ErrInvalidArgument, len(mem), align)
	}
	a := &Allocator{
		region:       r,
		mem:          mem[: units*align : units*align],
		align:        align,
		shift:        uint(bits.TrailingZeros64(uint64(align))),
		units:        units,
		bytes:        units * align,
		live:         newLiveTable(),
		free:         newExtentIndex(),
		freeUnits:    units,
		largestUnits: units,
	}
	if c, ok := r.(closedRegion); ok {
		a.closed = c.closedFlag()
	}
	if err := a.initFree(r); err != nil {
		return nil, err
	}
	if err := claimRegion(a); err != nil {
		return nil, err
	}
	return a, nil
}

// Align returns the block alignment in bytes.
func (a *Allocator) Align() int64 { return a.align }

// Capacity returns the number of bytes the allocator manages; over a
// GrowingRegion, all of them once every range is usable (Stats.Capacity
// reports the part usable now).
func (a *Allocator) Capacity() int64 { return a.bytes }

// Region returns the region the allocator carves.
func (a *Allocator) Region() Region { return a.region }

// sizeUnits validates an object size and returns it in alignment units.
// The check is small enough to inline; the errors are built out of line.
func (a *Allocator) sizeUnits(size int64) (int64, error) {
	if size > 0 && size <= a.bytes {
		return (size + a.align - 1) >> (a.shift & 63), nil
	}
	return 0, a.sizeError(size)
}

// sizeError is sizeUnits' error for a size that is not positive or exceeds
// the capacity.
func (a *Allocator) sizeError(size int64) error {
	if size <= 0 {
		return fmt.Errorf("%w: size %d must be positive", ErrInvalidArgument, size)
	}
	return errorf2(ErrInvalidArgument, ErrOutOfMemory, "size %d exceeds capacity %d", size, a.bytes)
}

// batchUnits validates a batch request and returns the object size in units.
// For an all-or-nothing batch (exact) n objects must be addressable; for
// AllocateUpTo and Fit n is only an upper bound, and any n ≥ 0 is valid.
func (a *Allocator) batchUnits(size int64, n int, p Placement, exact bool) (int64, error) {
	if !p.valid() {
		return 0, fmt.Errorf("%w: unknown placement %d", ErrInvalidArgument, p)
	}
	if n < 0 {
		return 0, fmt.Errorf("%w: count %d is negative", ErrInvalidArgument, n)
	}
	s, err := a.sizeUnits(size)
	if err != nil {
		return 0, err
	}
	if exact && n > 0 && int64(n) > math.MaxInt64/(s<<a.shift) {
		return 0, fmt.Errorf("%w: %d objects of %d bytes overflow int64", ErrInvalidArgument, n, s<<a.shift)
	}
	return s, nil
}

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
	if c := a.closed; c == nil || a.mem == nil || c.Load() {
		if !a.openSlowLocked() {
			a.mu.Unlock()
			return Block{}, ErrClosed
		}
	}
	a.growLocked()
	id, pred := a.free.bestFit(s)
	if id == 0 {
		err := a.failLocked(s, 1)
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
	if !a.openLocked() {
		return dst, ErrClosed
	}
	if n == 0 {
		return nonNil(dst), nil
	}
	a.growLocked()
	k := int64(n)
	run, pred := int32(0), int32(0)
	if p != Scattered {
		run, pred = a.free.bestFit(s * k)
	}
	switch {
	case run != 0:
		a.live.reserve(n)
		dst = a.carveLocked(run, pred, s, k, grow(dst, n))
	case p == Contiguous || a.free.slots(s, k) < k:
		return dst, a.failLocked(s, k)
	default:
		a.live.reserve(n)
		dst = a.scatterLocked(s, k, grow(dst, n))
	}
	a.largestUnits = a.free.largest()
	return dst, nil
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
	run, pred := int32(0), int32(0)
	if p != Scattered {
		run, pred = a.free.bestFit(s * k)
	}
	a.live.reserve(int(k))
	if run != 0 {
		dst = a.carveLocked(run, pred, s, k, grow(dst, int(k)))
	} else {
		dst = a.scatterLocked(s, k, grow(dst, int(k)))
	}
	a.largestUnits = a.free.largest()
	return dst, nil
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

// Free releases blocks. It validates every block before it frees any: a
// block is valid only if it equals a live block exactly, offset, size and
// generation, and appears once in the call. A handle kept after its block
// was freed is stale: once the same offset and size are handed out again
// the new block has a new generation, so the stale handle is rejected and
// cannot free the new owner's block. Any invalid block means nothing is
// freed and the error wraps ErrInvalidBlock and names the block. Freed
// blocks coalesce with free neighbours at once.
func (a *Allocator) Free(blocks ...Block) error {
	if len(blocks) == 1 {
		return a.freeOne(blocks[0])
	}
	return a.freeMany(blocks)
}

// freeOne is Free of a single block, the common call: the same checks
// as Free's, without the bookkeeping of runs, without a defer, and with
// openLocked and liveTable.deleteAt's common case inlined by hand.
func (a *Allocator) freeOne(b Block) error {
	a.mu.Lock()
	if c := a.closed; c == nil || a.mem == nil || c.Load() {
		if !a.openSlowLocked() {
			a.mu.Unlock()
			return ErrClosed
		}
	}
	off, size := b.Offset, b.Size
	if size <= 0 || off < 0 || off > a.bytes || size > a.bytes-off || (off|size)&(a.align-1) != 0 {
		err := invalidBlock(0, b, a.whyInvalidLocked(b, nil, -1))
		a.mu.Unlock()
		return err
	}
	u, s := off>>a.shift, size>>a.shift
	slot := a.live.find(u)
	if slot < 0 || a.live.slots[slot].size != s || a.live.slots[slot].gen != b.Gen {
		err := invalidBlock(0, b, a.whyInvalidLocked(b, nil, slot))
		a.mu.Unlock()
		return err
	}
	if !a.live.clearTail(slot) {
		a.live.deleteShift(slot)
	}
	// addFreeLocked's two common cases, inlined: the block merges with
	// exactly one free neighbour, which grows over it; that neighbour's
	// entry in one address table moves, found by the lookup that found
	// the neighbour.
	x, end := &a.free, u+s
	li, ri := -1, -1
	if u > 0 {
		li = x.byEnd.find(u)
	}
	if end < a.units {
		ri = x.byStart.find(end)
	}
	switch {
	case li < 0 && ri >= 0:
		r := x.byStart.vals[ri]
		if !x.byStart.clearTail(ri) {
			x.byStart.deleteShift(ri)
		}
		x.byStart.insertNew(u, r)
		if n := &x.nodes[r]; r == x.maxID {
			n.start, n.size = u, n.size+s
		} else {
			x.raiseBelowMax(r, u, n.size+s)
		}
		a.freeUnits += s
		a.usedUnits -= s
	case li >= 0 && ri < 0:
		l := x.byEnd.vals[li]
		if !x.byEnd.clearTail(li) {
			x.byEnd.deleteShift(li)
		}
		x.byEnd.insertNew(end, l)
		if n := &x.nodes[l]; l == x.maxID {
			n.size += s
		} else {
			x.raiseBelowMax(l, n.start, n.size+s)
		}
		a.freeUnits += s
		a.usedUnits -= s
	default:
		a.releaseLocked(u, s)
	}
	a.counters.Frees++
	a.liveBlocks--
	a.largestUnits = a.free.largest()
	a.mu.Unlock()
	return nil
}

// freeMany is Free of any number of blocks but one.
func (a *Allocator) freeMany(blocks []Block) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.openLocked() {
		return ErrClosed
	}
	// Phase 1: find each block's live entry and take it out of the table,
	// one probe per block (liveTable.takeEach). An entry taken out cannot
	// match again, so a block repeated in the call fails here too. On any
	// invalid block the entries taken so far go back and nothing else has
	// changed. A large call marks the entries as tombs and purges them
	// once at the end (liveTable.bulk).
	bulk := a.live.bulk(len(blocks))
	if i := a.live.takeEach(blocks, a.shift, a.bytes, a.align-1, bulk); i < len(blocks) {
		a.restoreLocked(blocks[:i], bulk)
		return invalidBlock(i, blocks[i], a.whyInvalidLocked(blocks[i], blocks[:i], a.live.find(blocks[i].Offset>>a.shift)))
	}
	// Blocks that follow each other in memory form runs, for phase 2.
	runs, ordered := appendRuns(a.runs[:0], blocks, a.shift)
	if !ordered {
		if cap(a.runsTmp) < len(runs) {
			a.runsTmp = make([]freeRun, len(runs), cap(runs))
		}
		runs = mergeRuns(runs, a.runsTmp[:len(runs)])
	}
	a.runs = runs
	if bulk {
		a.live.purge()
	}
	// Phase 2: return each run to the free extents as one range.
	for _, r := range runs {
		a.releaseLocked(r.start, r.end-r.start)
	}
	a.counters.Frees += uint64(len(blocks))
	a.liveBlocks -= int64(len(blocks))
	a.largestUnits = a.free.largest()
	return nil
}

// restoreLocked puts back the live entries of blocks, which phase 1 of Free
// validated exactly and took out (as tombs when bulk).
func (a *Allocator) restoreLocked(blocks []Block, bulk bool) {
	if bulk {
		a.live.purge()
	}
	a.live.reserve(len(blocks))
	for _, b := range blocks {
		a.live.insert(b.Offset>>a.shift, b.Size>>a.shift, b.Gen)
	}
}

func invalidBlock(i int, b Block, reason string) error {
	return fmt.Errorf("%w: block %d {Offset: %d, Size: %d, Gen: %d}: %s", ErrInvalidBlock, i, b.Offset, b.Size, b.Gen, reason)
}

// freeRun is a maximal run of blocks in a Free call that follow each other
// in memory: [start, end) in units.
type freeRun struct{ start, end int64 }

// appendRuns appends to runs the maximal runs of blocks that follow each
// other in memory, in the order of blocks, and reports whether they
// ascend, so that none touches another and mergeRuns has nothing to do.
// The blocks are valid: Free's phase 1 has checked them.
func appendRuns(runs []freeRun, blocks []Block, shift uint) ([]freeRun, bool) {
	if len(blocks) == 0 {
		return runs, true
	}
	ordered := true
	run := freeRun{start: blocks[0].Offset >> shift}
	run.end = run.start
	for i := range blocks {
		u := blocks[i].Offset >> shift
		if u != run.end {
			runs = append(runs, run)
			ordered = ordered && u > run.end
			run.start = u
		}
		run.end = u + blocks[i].Size>>shift
	}
	return append(runs, run), ordered
}

// mergeRuns sorts runs by address and joins those that touch, in place;
// tmp is scratch of the same length. Blocks that a call lists out of
// address order, as on-demand eviction lists its victims in the policy's
// order, then return to the free extents as the ranges they form
// together: one release per range instead of one per block, each of which
// would file its block as an extent of its own and later merge it with its
// neighbours (issue 10: scattered victims cost 2.1× adjacent ones).
func mergeRuns(runs, tmp []freeRun) []freeRun {
	sortRuns(runs, tmp)
	out := runs[:1]
	for _, r := range runs[1:] {
		if last := &out[len(out)-1]; last.end == r.start {
			last.end = r.end
		} else {
			out = append(out, r)
		}
	}
	return out
}

// sortRuns sorts runs by start. A short slice goes to slices.SortFunc;
// a long one to a radix sort, a byte a pass over only the bits in which
// the starts differ (two passes for 5700 objects of 8 MiB in 45 GiB),
// O(n) where a comparison sort took 0.5 ms for 5700 runs.
func sortRuns(runs, tmp []freeRun) {
	if len(runs) < 64 {
		slices.SortFunc(runs, func(x, y freeRun) int { return cmp.Compare(x.start, y.start) })
		return
	}
	or, and := uint64(0), ^uint64(0)
	for _, r := range runs {
		or |= uint64(r.start)
		and &= uint64(r.start)
	}
	diff := or ^ and
	src, dst := runs, tmp[:len(runs)]
	for sh := bits.TrailingZeros64(diff); sh < bits.Len64(diff); sh += 8 {
		var at [256]int
		for _, r := range src {
			at[uint8(uint64(r.start)>>sh)]++
		}
		pos := 0
		for d, c := range at {
			at[d] = pos
			pos += c
		}
		for _, r := range src {
			d := uint8(uint64(r.start) >> sh)
			dst[at[d]] = r
			at[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &runs[0] {
		copy(runs, src)
	}
}

// whyInvalidLocked explains why b failed Free's check. before are the
// blocks of the call ahead of it, whose entries are back in the table;
// slot is b's live entry, or -1.
func (a *Allocator) whyInvalidLocked(b Block, before []Block, slot int) string {
	capacity := a.bytes
	switch {
	case b.Size <= 0:
		return "size is not positive"
	case b.Offset < 0 || b.Offset > capacity || b.Size > capacity-b.Offset:
		return "out of range"
	case (b.Offset|b.Size)&(a.align-1) != 0:
		return fmt.Sprintf("not aligned to %d", a.align)
	case slices.Contains(before, b):
		return "repeated in this call"
	case slot < 0:
		return "no live block starts here (already free, or never allocated)"
	case a.live.slots[slot].size != b.Size>>a.shift:
		return fmt.Sprintf("size does not match the live block at this offset (%d bytes)", a.live.slots[slot].size<<a.shift)
	}
	return fmt.Sprintf("stale handle: the live block at this offset is generation %d (freed and handed out again)", a.live.slots[slot].gen)
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

// releaseLocked returns the unit range [u, u+size), which holds no live
// block, to the free extents, merging with the free extent that ends at u
// and the one that starts at u+size: two address-table lookups. A unit next
// to the range is either free or in a live block, and a free one belongs to
// an extent that ends or starts exactly there, because free extents are
// maximal. It is the one place where units become free.
func (a *Allocator) releaseLocked(u, size int64) {
	a.addFreeLocked(u, size)
	a.usedUnits -= size
}

// addFreeLocked adds [u, u+size), which no live block or free extent
// covers, to the free extents, merging with the free extent that ends at u
// and the one that starts at u+size. Free (through releaseLocked) and
// growth (grow.go) both use it.
func (a *Allocator) addFreeLocked(u, size int64) {
	x := &a.free
	end := u + size
	li, ri := -1, -1
	if u > 0 {
		li = x.byEnd.find(u)
	}
	if end < a.units {
		ri = x.byStart.find(end)
	}
	switch {
	case li >= 0 && ri >= 0:
		l, r := x.byEnd.vals[li], x.byStart.vals[ri]
		ln, rn := x.nodes[l], x.nodes[r]
		x.remove(r)
		x.byEnd.rekey(u, rn.start+rn.size, l)
		x.raise(l, ln.start, ln.size+size+rn.size)
	case li >= 0:
		// The address-table slot found above moves with the extent's
		// end, without a second probe.
		l := x.byEnd.vals[li]
		x.byEnd.deleteAt(li)
		x.byEnd.insertNew(end, l)
		x.raise(l, x.nodes[l].start, x.nodes[l].size+size)
	case ri >= 0:
		r := x.byStart.vals[ri]
		x.byStart.deleteAt(ri)
		x.byStart.insertNew(u, r)
		x.raise(r, u, x.nodes[r].size+size)
	default:
		x.add(u, size)
	}
	a.freeUnits += size
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

// Bytes returns the memory of block b, or nil when b lies outside the
// region or the allocator is closed. It checks range, not liveness: the
// slice is valid while b is live.
func (a *Allocator) Bytes(b Block) []byte {
	a.mu.Lock()
	var mem []byte
	if a.openLocked() {
		mem = a.mem
	}
	a.mu.Unlock()
	if b.Offset < 0 || b.Size < 0 || b.Offset > int64(len(mem)) || b.Size > int64(len(mem))-b.Offset {
		return nil
	}
	return mem[b.Offset : b.Offset+b.Size : b.Offset+b.Size]
}

// Stats returns a snapshot in O(1).
func (a *Allocator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem != nil {
		a.growLocked()
	}
	return Stats{
		Capacity:    (a.usedUnits + a.freeUnits) << a.shift,
		Used:        a.usedUnits << a.shift,
		Free:        a.freeUnits << a.shift,
		LargestFree: a.largestUnits << a.shift,
		FreeExtents: a.free.len(),
		LiveBlocks:  a.liveBlocks,
		Counters:    a.counters,
	}
}

// FreeExtents returns the free extents in address order. It costs
// O(F log F) and allocates; it is meant for tests, debugging and
// fragmentation reports, not the hot path.
func (a *Allocator) FreeExtents() []Block {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem != nil {
		a.growLocked()
	}
	out := make([]Block, 0, a.free.len())
	a.free.byStart.each(func(start int64, id int32) {
		out = append(out, Block{Offset: start << a.shift, Size: a.free.nodes[id].size << a.shift})
	})
	sortBlocks(out)
	return out
}

// Close releases the region. It is idempotent; every later call fails with
// ErrClosed, Bytes returns nil and Fit returns 0.
func (a *Allocator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return nil
	}
	a.markClosedLocked()
	return a.region.Close()
}

// openLocked reports whether the allocator may still hand out or take back
// memory: it is not closed, and neither is its region. A region closed
// directly, behind the allocator's back, closes the allocator here, so
// every later call returns ErrClosed instead of handing out offsets into
// unmapped memory. Regions of this package answer with one atomic load;
// others through Bytes() == nil.
func (a *Allocator) openLocked() bool {
	if c := a.closed; c != nil && a.mem != nil && !c.Load() {
		return true
	}
	return a.openSlowLocked()
}

// openSlowLocked is openLocked for a closed allocator, a closed region or a
// region of another package.
func (a *Allocator) openSlowLocked() bool {
	if a.mem == nil {
		return false
	}
	if a.regionClosed() {
		a.markClosedLocked()
		return false
	}
	return true
}

// markClosedLocked closes the allocator's side: no more calls, no claim.
func (a *Allocator) markClosedLocked() {
	a.mem = nil
	a.dead.Store(true)
	unclaimRegion(a)
}

// regionClosed reports whether the region has been closed.
func (a *Allocator) regionClosed() bool {
	if a.closed != nil {
		return a.closed.Load()
	}
	return a.region.Bytes() == nil
}

func grow(dst []Block, n int) []Block {
	if cap(dst)-len(dst) < n {
		d := make([]Block, len(dst), len(dst)+n)
		copy(d, dst)
		dst = d
	}
	return dst
}

func sortBlocks(bs []Block) {
	slices.SortFunc(bs, func(x, y Block) int { return cmp.Compare(x.Offset, y.Offset) })
}

func nonNil(dst []Block) []Block {
	if dst == nil {
		return []Block{}
	}
	return dst
}
