package allocref

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
)

// AllocView is what CompareView observes of an allocator: its statistics,
// its free extents in address order and its own invariant check.
// *allocator.Allocator satisfies it, and so does any wrapper around one,
// including the deliberately broken wrappers that tests use to prove that
// a check can fail.
type AllocView interface {
	Stats() allocator.Stats
	FreeExtents() []allocator.Block
	Verify() error
}

// UnderTest is everything the fuzz targets and the properties call on an
// allocator. *allocator.Allocator satisfies it, and so do the broken
// wrappers in package mutant.
type UnderTest interface {
	AllocView
	Allocate(size int64) (allocator.Block, error)
	AllocateBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, error)
	AllocateUpTo(size int64, n int, p allocator.Placement) ([]allocator.Block, error)
	Fit(size int64, n int) int
	Free(blocks ...allocator.Block) error
}

// CompareView checks any AllocView against the model: the allocator's own
// invariants, byte accounting (Used + Free = Capacity, Free equal to the model's),
// the largest free extent, the live block count and the exact list of
// free extents, which must be the model's maximal runs, so an allocator
// that leaves two adjacent extents unmerged fails here.
func (r *Alloc) CompareView(v AllocView) error {
	if err := v.Verify(); err != nil {
		return fmt.Errorf("invariant: %w", err)
	}
	st := v.Stats()
	runs := r.Runs()
	capacity := r.Capacity()
	switch {
	case st.Capacity != capacity:
		return fmt.Errorf("capacity %d, reference %d", st.Capacity, capacity)
	case st.Used+st.Free != st.Capacity:
		return fmt.Errorf("used %d + free %d != capacity %d", st.Used, st.Free, st.Capacity)
	case st.Free != r.FreeBytes():
		return fmt.Errorf("free bytes %d, reference %d", st.Free, r.FreeBytes())
	case st.LargestFree != r.Largest():
		return fmt.Errorf("largest free %d, reference %d", st.LargestFree, r.Largest())
	case st.FreeExtents != len(runs):
		return fmt.Errorf("%d free extents, reference %d (not coalesced?)", st.FreeExtents, len(runs))
	case st.LiveBlocks != int64(len(r.live)):
		return fmt.Errorf("%d live blocks, reference %d", st.LiveBlocks, len(r.live))
	}
	ext := v.FreeExtents()
	if len(ext) != len(runs) {
		return fmt.Errorf("FreeExtents lists %d extents, reference %d (not coalesced?)", len(ext), len(runs))
	}
	for i, e := range ext {
		if e.Offset != runs[i][0]*r.Align || e.Size != runs[i][1]*r.Align {
			return fmt.Errorf("free extent %d is %+v, reference [%d,+%d)", i, e, runs[i][0]*r.Align, runs[i][1]*r.Align)
		}
	}
	return nil
}
