package allocator

import "github.com/kvalloc/kvalloc/internal/invariants"

// Reissue hands live blocks to new owners in place: each block comes back
// with the same offset and size under a new generation, as if it had been
// freed and that very extent allocated again, but in one lock cycle and
// without touching the free extents. The old handles are stale from then
// on: Free and Reissue reject them (ErrInvalidBlock), so a holder of the old
// handle cannot free the new owner's block. A cache that evicts an object to
// make room for one of the same size (the L1 manager's on-demand eviction)
// reuses the victim's block this way, as vLLM reuses a free block.
//
// Validation is Free's: every block must equal a live block exactly,
// offset, size and generation, and appear once in the call; otherwise
// nothing changes and the error wraps ErrInvalidBlock and names the block.
// Counters count a reissue as a free and an allocation (Frees and Allocs
// each grow by len(blocks)); Used, Free and the live blocks do not change.
// After Close it returns ErrClosed.
func (a *Allocator) Reissue(blocks ...Block) ([]Block, error) {
	return a.AppendReissue(nil, blocks)
}

// AppendReissue is Reissue appending the new handles to dst, in the order
// of blocks, so a caller that reuses dst allocates nothing. On failure it
// returns dst unchanged.
func (a *Allocator) AppendReissue(dst []Block, blocks []Block) ([]Block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if invariants.Enabled {
		defer a.checkLocked("Reissue")
	}
	if !a.openLocked() {
		return dst, ErrClosed
	}
	capacity, mask := a.bytes, a.align-1
	gen := a.gen
	for i, b := range blocks {
		off, size := b.Offset, b.Size
		slot := -1
		if size > 0 && off >= 0 && off <= capacity && size <= capacity-off && (off|size)&mask == 0 {
			slot = a.live.find(off >> a.shift)
			if slot >= 0 && a.live.slots[slot].size == size>>a.shift && a.live.slots[slot].gen == b.Gen {
				gen++
				a.live.slots[slot].gen = gen
				continue
			}
		}
		// Name the cause while the earlier blocks carry their new
		// generations (a repeat is found among them first), then give
		// them back their old ones.
		err := invalidBlock(i, b, a.whyInvalidLocked(b, blocks[:i], slot))
		for _, p := range blocks[:i] {
			a.live.slots[a.live.find(p.Offset>>a.shift)].gen = p.Gen
		}
		return dst, err
	}
	dst = nonNil(grow(dst, len(blocks)))
	for i, b := range blocks {
		dst = append(dst, Block{Offset: b.Offset, Size: b.Size, Gen: a.gen + uint64(i) + 1})
	}
	a.gen = gen
	a.counters.Allocs += uint64(len(blocks))
	a.counters.Frees += uint64(len(blocks))
	return dst, nil
}
