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

	closed *RegionState // the region's state, claimed by New: whether it was closed
}

// New returns an allocator over r. The allocator owns r from then on and
// closes it in Close. Only whole alignment units of r are used: a tail
// shorter than Align is never handed out.
//
// A region belongs to one allocator for its whole life: New over a region
// that an allocator has claimed (its RegionState) is an error wrapping
// ErrInvalidArgument, and so is a region that is closed or whose State is
// nil. New touches no memory in proportion to the capacity: its metadata
// starts at a few hundred bytes and grows with the live blocks and free
// extents.
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
	st := r.State()
	if st == nil {
		return nil, fmt.Errorf("%w: the %s region has no state (Region.State returned nil)", ErrInvalidArgument, r.Kind())
	}
	mem := r.Bytes()
	if mem == nil || st.Closed() {
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
		closed:       st,
	}
	if err := a.initFree(r); err != nil {
		return nil, err
	}
	if err := a.claim(); err != nil {
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

func sortBlocks(bs []Block) {
	slices.SortFunc(bs, func(x, y Block) int { return cmp.Compare(x.Offset, y.Offset) })
}
