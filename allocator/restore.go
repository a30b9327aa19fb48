package allocator

import (
	"cmp"
	"fmt"
	"slices"
)

// Restore makes blocks live in a fresh allocator, exactly as they were
// handed out by an earlier allocator over the same memory (same capacity,
// same alignment): same offsets, sizes and generations. It is how a
// restarted daemon takes over a pool whose objects outlived the process
// that allocated them: the blocks' bytes are untouched, and the handles
// the earlier allocator gave out stay valid (Free accepts them). Later
// blocks get generations above every restored one.
//
// The allocator must be fresh (no live block, nothing allocated since New)
// and its whole region usable (a GrowingRegion fully grown). Every block
// must be non-empty, aligned, inside the capacity, of a nonzero
// generation, and no two may overlap. Any violation is an error wrapping
// ErrInvalidBlock (a bad block) or ErrInvalidArgument (an allocator that
// is not fresh), and nothing changes. It costs O(n log n) in the blocks.
func (a *Allocator) Restore(blocks []Block) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.openLocked() {
		return fmt.Errorf("%w: restore", ErrClosed)
	}
	a.growLocked()
	switch {
	case a.growth.src != nil:
		return fmt.Errorf("%w: restore: the region is still growing (%d of %d units usable)", ErrInvalidArgument, a.growth.units, a.units)
	case a.liveBlocks != 0 || a.usedUnits != 0 || a.freeUnits != a.units || a.free.len() != 1:
		return fmt.Errorf("%w: restore: the allocator is not fresh (%d live blocks)", ErrInvalidArgument, a.liveBlocks)
	}
	bs := slices.Clone(blocks)
	slices.SortFunc(bs, func(x, y Block) int { return cmp.Compare(x.Offset, y.Offset) })
	mask := a.align - 1
	var maxGen uint64
	for i, b := range bs {
		switch {
		case b.Size <= 0 || b.Offset < 0 || b.Offset&mask != 0 || b.Size&mask != 0:
			return fmt.Errorf("%w: restore: block %+v is empty or not aligned to %d", ErrInvalidBlock, b, a.align)
		case b.Offset > a.bytes-b.Size:
			return fmt.Errorf("%w: restore: block %+v ends past the capacity %d", ErrInvalidBlock, b, a.bytes)
		case b.Gen == 0:
			return fmt.Errorf("%w: restore: block %+v has generation 0", ErrInvalidBlock, b)
		case i > 0 && bs[i-1].End() > b.Offset:
			return fmt.Errorf("%w: restore: blocks %+v and %+v overlap", ErrInvalidBlock, bs[i-1], b)
		}
		maxGen = max(maxGen, b.Gen)
	}
	a.free = newExtentIndex()
	a.live.reserve(len(bs))
	var at, used int64 // in units
	for _, b := range bs {
		u, n := b.Offset>>a.shift, b.Size>>a.shift
		if u > at {
			a.free.add(at, u-at)
		}
		a.live.insert(u, n, b.Gen)
		used += n
		at = u + n
	}
	if at < a.units {
		a.free.add(at, a.units-at)
	}
	a.usedUnits, a.freeUnits, a.liveBlocks = used, a.units-used, int64(len(bs))
	a.largestUnits = a.free.largest()
	a.gen = max(a.gen, maxGen)
	if err := a.verifyLocked(); err != nil {
		return fmt.Errorf("allocator: restore left a broken state: %w", err)
	}
	return nil
}
