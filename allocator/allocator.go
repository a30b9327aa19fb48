package allocator

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
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

	// Live blocks: the first and the last unit of each. ends carries a
	// summary level so Free checks a block's interior in O(1) words.
	starts bitmap
	ends   summedBitmap
	free   extentIndex

	freeUnits, usedUnits, liveBlocks int64
	largestUnits                     int64 // cached after every change, so Stats is O(1)
	counters                         Counters
	runs                             []freeRun // Free's scratch, reused
	growth                           growth    // over a GrowingRegion: the ranges added so far (grow.go)
}

// Counters are the allocator's monotonic event counts.
type Counters struct {
	// Allocs and Frees count blocks, not calls.
	Allocs, Frees uint64
	// FailedNoSpace counts calls that failed because fewer free bytes than
	// requested existed: exhaustion.
	FailedNoSpace uint64
	// FailedFragmented counts calls that failed although enough free bytes
	// existed, because no free extent, or no set of them, could hold the
	// objects: fragmentation.
	FailedFragmented uint64
	// PartialGrants counts AllocateUpTo calls that granted fewer objects
	// than asked, zero included.
	PartialGrants uint64
}

// Stats is a snapshot of the allocator. All byte figures are multiples of
// the alignment.
type Stats struct {
	Capacity    int64 // bytes the allocator manages; over a GrowingRegion, the part usable so far
	Used        int64 // bytes in live blocks
	Free        int64 // Capacity - Used, slivers included
	LargestFree int64 // bytes in the largest free extent: the biggest object that fits now
	FreeExtents int   // number of maximal free extents
	LiveBlocks  int64 // number of live blocks
	Counters
}

// New returns an allocator over r. The allocator owns r from then on and
// closes it in Close. Only whole alignment units of r are used: a tail
// shorter than Align is never handed out.
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
		starts:       newBitmap(units),
		ends:         newSummedBitmap(units),
		free:         newExtentIndex(),
		freeUnits:    units,
		largestUnits: units,
	}
	if err := a.initFree(r); err != nil {
		return nil, err
	}
	return a, nil
}

// Align returns the block alignment in bytes.
func (a *Allocator) Align() int64 { return a.align }

// Capacity returns the number of bytes the allocator manages; over a
// GrowingRegion, all of them once every range is usable (Stats.Capacity
// reports the part usable now).
func (a *Allocator) Capacity() int64 { return a.units << a.shift }

// Region returns the region the allocator carves.
func (a *Allocator) Region() Region { return a.region }

// sizeUnits validates an object size and returns it in alignment units.
func (a *Allocator) sizeUnits(size int64) (int64, error) {
	if size <= 0 {
		return 0, fmt.Errorf("%w: size %d must be positive", ErrInvalidArgument, size)
	}
	if size > a.units<<a.shift {
		return 0, fmt.Errorf("%w: %w: size %d exceeds capacity %d", ErrInvalidArgument, ErrOutOfMemory, size, a.units<<a.shift)
	}
	return (size + a.align - 1) >> a.shift, nil
}

// batchUnits validates a batch request and returns the object size in units.
func (a *Allocator) batchUnits(size int64, n int, p Placement) (int64, error) {
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
	if n > 0 && int64(n) > math.MaxInt64/(s<<a.shift) {
		return 0, fmt.Errorf("%w: %d objects of %d bytes overflow int64", ErrInvalidArgument, n, s<<a.shift)
	}
	return s, nil
}

// Allocate reserves one block of at least size bytes: the smallest free
// extent that holds it, the lowest address among equals. When nothing fits
// the error wraps ErrOutOfMemory and says whether free bytes or contiguity
// were short.
func (a *Allocator) Allocate(size int64) (Block, error) {
	s, err := a.sizeUnits(size)
	if err != nil {
		return Block{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return Block{}, ErrClosed
	}
	a.growLocked()
	id := a.free.bestFit(s)
	if id == 0 {
		return Block{}, a.failLocked(s, 1)
	}
	u := a.takeLocked(id, s, 1)
	a.starts.set(u)
	a.ends.set(u + s - 1)
	a.largestUnits = a.free.largest()
	return Block{Offset: u << a.shift, Size: s << a.shift}, nil
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
	s, err := a.batchUnits(size, n, p)
	if err != nil {
		return dst, err
	}
	if n == 0 {
		return nonNil(dst), nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return dst, ErrClosed
	}
	a.growLocked()
	k := int64(n)
	run := int32(0)
	if p != Scattered {
		run = a.free.bestFit(s * k)
	}
	switch {
	case run != 0:
		dst = a.carveLocked(run, s, k, grow(dst, n))
	case p == Contiguous || a.free.slots(s, k) < k:
		return dst, a.failLocked(s, k)
	default:
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
	s, err := a.batchUnits(size, n, p)
	if err != nil {
		return dst, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
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
	run := int32(0)
	if p != Scattered {
		run = a.free.bestFit(s * k)
	}
	if run != 0 {
		dst = a.carveLocked(run, s, k, grow(dst, int(k)))
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
	s, err := a.batchUnits(size, n, Scattered)
	if err != nil || n == 0 {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return 0
	}
	a.growLocked()
	return int(a.free.slots(s, int64(n)))
}

// Free releases blocks. It validates every block before it changes
// anything: a block is valid only if it equals a live block exactly, offset
// and size, and appears once in the call. Any invalid block means nothing is
// freed and the error wraps ErrInvalidBlock and names the block. Freed
// blocks coalesce with free neighbours at once.
func (a *Allocator) Free(blocks ...Block) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mem == nil {
		return ErrClosed
	}
	// Phase 1: validate every block; change nothing. Each block needs its
	// start and end bits set; each run of blocks that follow each other in
	// memory needs no other end bit inside it, which one popcount per run
	// checks (a singleton is a run of one). The runs are kept for phase 2.
	capacity, mask := a.units<<a.shift, a.align-1
	ascending := true
	runs := a.runs[:0]
	prevEnd := int64(-1)
	for i, b := range blocks {
		off, size := b.Offset, b.Size
		if size <= 0 || off < 0 || off > capacity || size > capacity-off || (off|size)&mask != 0 ||
			!a.starts.get(off>>a.shift) || !a.ends.get((off+size)>>a.shift-1) {
			return invalidBlock(i, b, a.whyNotLiveLocked(b))
		}
		if off < prevEnd {
			ascending = false
		}
		if off != prevEnd {
			runs = append(runs, freeRun{first: i, start: off >> a.shift})
		}
		r := &runs[len(runs)-1]
		r.end = (off + size) >> a.shift
		r.blocks++
		prevEnd = off + size
	}
	a.runs = runs
	for _, r := range runs {
		if !a.runHoldsOnlyItsBlocksLocked(blocks, r) {
			return a.badRunLocked(blocks, r)
		}
	}
	if !ascending {
		// Blocks that ascend without overlap cannot repeat; others might.
		if i, repeated := a.findRepeatLocked(blocks); repeated {
			return invalidBlock(i, blocks[i], "repeated in this call")
		}
	}
	// Phase 2: release each run as one range.
	for _, r := range runs {
		if !r.dense() {
			// Sparse bits (large blocks): clear each block's two.
			for _, b := range blocks[r.first : r.first+int(r.blocks)] {
				a.starts.clear(b.Offset >> a.shift)
				a.ends.clear((b.Offset+b.Size)>>a.shift - 1)
			}
		} else {
			a.starts.clearRange(r.start, r.end)
			a.ends.clearRange(r.start, r.end)
		}
		a.releaseLocked(r.start, r.end-r.start)
	}
	a.counters.Frees += uint64(len(blocks))
	a.liveBlocks -= int64(len(blocks))
	a.largestUnits = a.free.largest()
	return nil
}

// findRepeatLocked reports the first block that repeats an earlier one in
// blocks, all of which are live. It clears each start bit it passes, so a
// repeat finds its bit clear, then restores them.
func (a *Allocator) findRepeatLocked(blocks []Block) (int, bool) {
	at, repeated := len(blocks), false
	for i, b := range blocks {
		if !a.starts.get(b.Offset >> a.shift) {
			at, repeated = i, true
			break
		}
		a.starts.clear(b.Offset >> a.shift)
	}
	for _, b := range blocks[:at] {
		a.starts.set(b.Offset >> a.shift)
	}
	return at, repeated
}

func invalidBlock(i int, b Block, reason string) error {
	return fmt.Errorf("%w: block %d {Offset: %d, Size: %d}: %s", ErrInvalidBlock, i, b.Offset, b.Size, reason)
}

// freeRun is a maximal run of blocks in a Free call that follow each other
// in memory: [start, end) in units, made of blocks blocks from index first.
type freeRun struct {
	first      int
	start, end int64
	blocks     int64
}

// dense reports whether the run's bitmap words are few for its blocks
// (small blocks): then one pass over the words, a popcount or a range
// clear, beats touching each block's bits, and Free uses word operations
// for both validation and release.
func (r freeRun) dense() bool { return (r.end-r.start)/64 <= 4*r.blocks }

// whyNotLiveLocked explains why b failed Free's per-block check.
func (a *Allocator) whyNotLiveLocked(b Block) string {
	capacity := a.units << a.shift
	switch {
	case b.Size <= 0:
		return "size is not positive"
	case b.Offset < 0 || b.Offset > capacity || b.Size > capacity-b.Offset:
		return "out of range"
	case (b.Offset|b.Size)&(a.align-1) != 0:
		return fmt.Sprintf("not aligned to %d", a.align)
	case !a.starts.get(b.Offset >> a.shift):
		return "no live block starts here (already free, or never allocated)"
	}
	return "size does not match the live block at this offset"
}

// runHoldsOnlyItsBlocksLocked reports whether run r holds no live-block
// end other than its blocks' own. A dense run (small blocks) is checked
// with one popcount over its words; a sparse one (large blocks) block by
// block through the summary level, a few words each.
func (a *Allocator) runHoldsOnlyItsBlocksLocked(blocks []Block, r freeRun) bool {
	if r.dense() {
		return a.ends.countRange(r.start, r.end) == r.blocks
	}
	for _, b := range blocks[r.first : r.first+int(r.blocks)] {
		u := b.Offset >> a.shift
		if a.ends.anySet(u, u+b.Size>>a.shift-1) {
			return false
		}
	}
	return true
}

// badRunLocked names the block of run r that spans more than one live
// block: the run holds more end bits than blocks.
func (a *Allocator) badRunLocked(blocks []Block, r freeRun) error {
	for i := r.first; i < r.first+int(r.blocks); i++ {
		b := blocks[i]
		u := b.Offset >> a.shift
		if a.ends.anySet(u, u+b.Size>>a.shift-1) {
			return invalidBlock(i, b, "size does not match the live block at this offset")
		}
	}
	panic("allocator: run check disagrees with block checks")
}

// takeLocked removes k objects of s units from the front of free extent id
// and accounts for them; it returns the first unit taken.
func (a *Allocator) takeLocked(id int32, s, k int64) int64 {
	e := a.free.nodes[id]
	if e.size == s*k {
		a.free.remove(id)
	} else {
		a.free.reshape(id, e.start+s*k, e.size-s*k)
	}
	a.freeUnits -= s * k
	a.usedUnits += s * k
	a.liveBlocks += k
	a.counters.Allocs += uint64(k)
	return e.start
}

// carveLocked takes k objects of s units from the front of free extent id,
// marks them live and appends their blocks to dst. Two bits and one append
// per block are the whole per-block cost of a batch.
func (a *Allocator) carveLocked(id int32, s, k int64, dst []Block) []Block {
	start := a.takeLocked(id, s, k)
	a.starts.setEvery(start, s, k)
	a.ends.setEvery(start+s-1, s, k)
	bs := s << a.shift
	for u := start; u < start+s*k; u += s {
		dst = append(dst, Block{Offset: u << a.shift, Size: bs})
	}
	return dst
}

// scatterLocked takes k objects of s units, smallest fitting extent first,
// carving as many as each holds. The caller has checked that k fit.
func (a *Allocator) scatterLocked(s, k int64, dst []Block) []Block {
	for k > 0 {
		id := a.free.bestFit(s)
		take := min(k, a.free.nodes[id].size/s)
		dst = a.carveLocked(id, s, take, dst)
		k -= take
	}
	return dst
}

// releaseLocked returns [u, u+size), whose live bits are already clear, to
// the free extents, merging with the free extent that ends at u and the one
// that starts at u+size. The live bitmaps say whether a neighbour is free
// (a unit next to a block is either part of a live block or free), so the
// address table is consulted only for neighbours that are.
func (a *Allocator) releaseLocked(u, size int64) {
	var l, r int32
	if u > 0 && !a.ends.get(u-1) {
		l, _ = a.free.byEnd.get(u)
	}
	if end := u + size; end < a.units && !a.starts.get(end) {
		r, _ = a.free.byStart.get(end)
	}
	switch {
	case l != 0 && r != 0:
		ln, rn := a.free.nodes[l], a.free.nodes[r]
		a.free.remove(r)
		a.free.reshape(l, ln.start, ln.size+size+rn.size)
	case l != 0:
		ln := a.free.nodes[l]
		a.free.reshape(l, ln.start, ln.size+size)
	case r != 0:
		rn := a.free.nodes[r]
		a.free.reshape(r, u, rn.size+size)
	default:
		a.free.add(u, size)
	}
	a.freeUnits += size
	a.usedUnits -= size
}

// failLocked records a failed allocation of k objects of s units and
// returns its error, which names the cause.
func (a *Allocator) failLocked(s, k int64) error {
	need := s * k << a.shift
	if a.freeUnits < s*k {
		a.counters.FailedNoSpace++
		return fmt.Errorf("%w: need %d bytes (%d × %d), only %d free", ErrOutOfMemory, need, k, s<<a.shift, a.freeUnits<<a.shift)
	}
	a.counters.FailedFragmented++
	return fmt.Errorf("%w: need %d bytes (%d × %d); %d free but fragmented (largest extent %d bytes, %d extents)",
		ErrOutOfMemory, need, k, s<<a.shift, a.freeUnits<<a.shift, a.largestUnits<<a.shift, a.free.len())
}

// Bytes returns the memory of block b, or nil when b lies outside the
// region or the allocator is closed. It checks range, not liveness: the
// slice is valid while b is live.
func (a *Allocator) Bytes(b Block) []byte {
	a.mu.Lock()
	mem := a.mem
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
	a.mem = nil
	return a.region.Close()
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
