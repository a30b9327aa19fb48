package mutant

import (
	"errors"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
)

// UpToOneShort grants one object fewer than AllocateUpTo could: it frees
// the last block of every non-empty grant. It is the Memory that stops
// below the maximum, like LMCache's 0.98 estimate. Fit is left correct, so
// only a check of the grant itself catches it.
type UpToOneShort struct{ *allocator.Allocator }

// AllocateUpTo returns one block fewer than the allocator granted.
func (a UpToOneShort) AllocateUpTo(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	return a.AppendUpTo(nil, size, n, p)
}

// AppendUpTo appends one block fewer than the allocator granted: the
// call the L1 manager makes.
func (a UpToOneShort) AppendUpTo(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	bs, err := a.Allocator.AppendUpTo(dst, size, n, p)
	if err != nil || len(bs) == len(dst) {
		return bs, err
	}
	if err := a.Allocator.Free(bs[len(bs)-1]); err != nil {
		return dst, err
	}
	return bs[:len(bs)-1], nil
}

// FitOneMore overstates Fit by one whenever fewer than n objects fit.
type FitOneMore struct{ *allocator.Allocator }

// Fit returns the true answer plus one, capped at n.
func (a FitOneMore) Fit(size int64, n int) int {
	return min(n, a.Allocator.Fit(size, n)+1)
}

// NoCoalesce reports free space as if freed blocks never merged with their
// neighbours: FreeExtents, Stats.FreeExtents and Stats.LargestFree are
// computed from the true extents split at the edges of every block ever
// freed. The memory itself is managed correctly; only the report is wrong,
// which is what a check of coalescing observes.
type NoCoalesce struct {
	*allocator.Allocator
	cuts map[int64]bool // offsets where a freed block started or ended
}

// NewNoCoalesce wraps a.
func NewNoCoalesce(a *allocator.Allocator) *NoCoalesce {
	return &NoCoalesce{Allocator: a, cuts: map[int64]bool{}}
}

// Free frees blocks and remembers their edges.
func (a *NoCoalesce) Free(blocks ...allocator.Block) error {
	if err := a.Allocator.Free(blocks...); err != nil {
		return err
	}
	for _, b := range blocks {
		a.cuts[b.Offset], a.cuts[b.End()] = true, true
	}
	return nil
}

// FreeExtents returns the true extents cut at every remembered edge.
func (a *NoCoalesce) FreeExtents() []allocator.Block {
	var out []allocator.Block
	for _, e := range a.Allocator.FreeExtents() {
		start := e.Offset
		for o := e.Offset + 1; o < e.End(); o++ {
			if a.cuts[o] {
				out = append(out, allocator.Block{Offset: start, Size: o - start})
				start = o
			}
		}
		out = append(out, allocator.Block{Offset: start, Size: e.End() - start})
	}
	return out
}

// Stats reports the extent count and largest extent of FreeExtents.
func (a *NoCoalesce) Stats() allocator.Stats {
	st := a.Allocator.Stats()
	ext := a.FreeExtents()
	st.FreeExtents = len(ext)
	st.LargestFree = 0
	for _, e := range ext {
		st.LargestFree = max(st.LargestFree, e.Size)
	}
	return st
}

// LeakOnFailure breaks "a failed call changes nothing": when a batch does
// not fit, it keeps whatever part of it does fit and still reports
// ErrOutOfMemory, so the kept blocks leak.
type LeakOnFailure struct{ *allocator.Allocator }

// AllocateBatch leaks a partial grant on failure.
func (a LeakOnFailure) AllocateBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	bs, err := a.Allocator.AllocateBatch(size, n, p)
	if errors.Is(err, allocator.ErrOutOfMemory) && !errors.Is(err, allocator.ErrInvalidArgument) {
		_, _ = a.Allocator.AllocateUpTo(size, n, allocator.Scattered)
	}
	return bs, err
}

// FreeForgivesRepeats drops repeated blocks from a Free call instead of
// rejecting the call, so a double free inside one call goes unnoticed.
type FreeForgivesRepeats struct{ *allocator.Allocator }

// Free frees each distinct block once.
func (a FreeForgivesRepeats) Free(blocks ...allocator.Block) error {
	var uniq []allocator.Block
	for _, b := range blocks {
		if !slices.Contains(uniq, b) {
			uniq = append(uniq, b)
		}
	}
	return a.Allocator.Free(uniq...)
}

// ContiguousScatters serves a Contiguous batch that no single extent holds
// from scattered extents instead of failing: the shape contract is broken.
type ContiguousScatters struct{ *allocator.Allocator }

// AllocateBatch scatters a Contiguous batch when one run cannot hold it.
func (a ContiguousScatters) AllocateBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	bs, err := a.Allocator.AllocateBatch(size, n, p)
	if p == allocator.Contiguous && errors.Is(err, allocator.ErrOutOfMemory) && !errors.Is(err, allocator.ErrInvalidArgument) {
		return a.Allocator.AllocateBatch(size, n, allocator.Scattered)
	}
	return bs, err
}

// UsedOffByOne misreports Stats.Used by one alignment unit whenever
// anything is live: byte accounting that does not add up.
type UsedOffByOne struct{ *allocator.Allocator }

// Stats reports Used one unit too high.
func (a UsedOffByOne) Stats() allocator.Stats {
	st := a.Allocator.Stats()
	if st.LiveBlocks > 0 {
		st.Used += a.Align()
	}
	return st
}

// StaleAccepted ignores generations in Free: a block that matches a live
// block's offset and size is freed whatever its generation, as an
// allocator without handle generations does. A stale handle, kept after its
// block was freed and the same offset and size were handed out again, then
// frees the new owner's block.
type StaleAccepted struct {
	*allocator.Allocator
	live map[int64]allocator.Block // offset -> the live handle there
}

// NewStaleAccepted wraps a.
func NewStaleAccepted(a *allocator.Allocator) *StaleAccepted {
	return &StaleAccepted{Allocator: a, live: map[int64]allocator.Block{}}
}

func (a *StaleAccepted) track(bs ...allocator.Block) {
	for _, b := range bs {
		a.live[b.Offset] = b
	}
}

// Allocate records the block it hands out.
func (a *StaleAccepted) Allocate(size int64) (allocator.Block, error) {
	b, err := a.Allocator.Allocate(size)
	if err == nil {
		a.track(b)
	}
	return b, err
}

// AllocateBatch records the blocks it hands out.
func (a *StaleAccepted) AllocateBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	bs, err := a.Allocator.AllocateBatch(size, n, p)
	a.track(bs...)
	return bs, err
}

// AllocateUpTo records the blocks it hands out.
func (a *StaleAccepted) AllocateUpTo(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	bs, err := a.Allocator.AllocateUpTo(size, n, p)
	a.track(bs...)
	return bs, err
}

// Free replaces each block's generation with the live one at its offset
// when the sizes match, then frees.
func (a *StaleAccepted) Free(blocks ...allocator.Block) error {
	fixed := slices.Clone(blocks)
	for i, b := range fixed {
		if l, ok := a.live[b.Offset]; ok && l.Size == b.Size {
			fixed[i].Gen = l.Gen
		}
	}
	if err := a.Allocator.Free(fixed...); err != nil {
		return err
	}
	for _, b := range fixed {
		delete(a.live, b.Offset)
	}
	return nil
}

// ReissueKeepsGeneration hands blocks back from Reissue under their old
// generations and changes nothing: the old handle stays valid, so its
// holder can free the new owner's block.
type ReissueKeepsGeneration struct{ *allocator.Allocator }

// Reissue returns blocks as they are.
func (a ReissueKeepsGeneration) Reissue(blocks ...allocator.Block) ([]allocator.Block, error) {
	return slices.Clone(blocks), nil
}
