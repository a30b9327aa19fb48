package l1

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
)

// The largest prefix. When a batch of n objects does not fit whole, the
// manager grants the first k keys needing memory, k the most objects of
// the batch's size that fit now, in one AppendUpTo call: the allocator
// computes k = min(n, Σ⌊extent/size⌋) in one walk over its free extents.
// This is exact because all objects of a batch share one size, so k
// objects fit exactly when k ≤ Σ⌊extent/size⌋, a condition monotone in k.
// LMCache's search with trial allocations (its largest-prefix fix) and its
// answer before that fix (all or nothing) are memories that answer
// AppendUpTo their way, in internal/reference/baseline.

// prefixLocked grants the largest prefix of n objects that fits, after the
// full batch failed.
func (m *Manager[K]) prefixLocked(size int64, n int) ([]allocator.Block, error) {
	if n <= 1 {
		return nil, nil // a one-key batch is all or nothing
	}
	return m.allocUpToLocked(size, n)
}

// allocUpToLocked makes one AppendUpTo call and checks its answer.
// Like allocBatchLocked, it answers in m.blocks.
func (m *Manager[K]) allocUpToLocked(size int64, n int) ([]allocator.Block, error) {
	m.flushLocked()
	m.stats.AllocCalls++
	blocks, err := m.mem.AppendUpTo(m.blocks[:0], size, n, m.cfg.Placement)
	m.blocks = blocks[:0]
	switch {
	case err != nil && isOOM(err):
		return nil, nil
	case err != nil:
		return nil, err
	case len(blocks) > n:
		m.freeLocked(blocks)
		return nil, fmt.Errorf("l1: memory returned %d blocks for up to %d", len(blocks), n)
	}
	if err := m.checkSizesLocked(blocks, size); err != nil {
		return nil, err
	}
	return blocks, nil
}
