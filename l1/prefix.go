package l1

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
)

// PrefixStrategy says how ReserveWrite finds the largest prefix of a batch
// that fits when the whole batch does not. Every strategy finds the same k
// on the same memory (except PrefixNone, which finds none); they differ in
// what they ask the memory.
type PrefixStrategy uint8

const (
	// PrefixOnePass, the zero value, asks the memory once with
	// AllocateUpTo, which computes k = min(n, Σ⌊extent/size⌋) in one walk
	// over the free extents. A Memory without AllocateUpTo falls back to
	// PrefixBinarySearch.
	PrefixOnePass PrefixStrategy = iota
	// PrefixBinarySearch is the search LMCache's largest-prefix fix
	// proposed, kept as the reference: after the failed full call,
	// binary-search [1, n-1] with all-or-nothing probes, each allocated
	// and freed at once, then allocate the largest size that fit. It
	// costs about log2(n) probes of up to n objects each (13 for n =
	// 5700).
	PrefixBinarySearch
	// PrefixNone grants nothing when the batch does not fit: LMCache's
	// behaviour before the fix, every key OutOfMemory.
	PrefixNone
)

// PrefixStrategies lists every strategy, for tests and benchmarks that run
// once per strategy.
var PrefixStrategies = []PrefixStrategy{PrefixOnePass, PrefixBinarySearch, PrefixNone}

var prefixNames = [...]string{
	PrefixOnePass:      "onepass",
	PrefixBinarySearch: "binarysearch",
	PrefixNone:         "none",
}

// String returns "onepass", "binarysearch" or "none".
func (s PrefixStrategy) String() string {
	if s.valid() {
		return prefixNames[s]
	}
	return fmt.Sprintf("PrefixStrategy(%d)", uint8(s))
}

// ParsePrefixStrategy is the inverse of PrefixStrategy.String.
func ParsePrefixStrategy(s string) (PrefixStrategy, error) {
	for _, p := range PrefixStrategies {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown prefix strategy %q", ErrInvalidArgument, s)
}

// MarshalText implements encoding.TextMarshaler, for config files.
func (s PrefixStrategy) MarshalText() ([]byte, error) {
	if !s.valid() {
		return nil, fmt.Errorf("%w: unknown prefix strategy %d", ErrInvalidArgument, uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *PrefixStrategy) UnmarshalText(b []byte) error {
	p, err := ParsePrefixStrategy(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}

func (s PrefixStrategy) valid() bool { return s <= PrefixNone }

// prefixLocked grants the largest prefix of n objects that fits, after the
// full batch failed.
func (m *Manager[K]) prefixLocked(size int64, n int) ([]allocator.Block, error) {
	switch {
	case n <= 1 || m.cfg.Prefix == PrefixNone:
		return nil, nil
	case m.cfg.Prefix == PrefixOnePass && m.upTo != nil:
		return m.allocUpToLocked(size, n)
	}
	return m.searchPrefixLocked(size, n)
}

// allocUpToLocked makes one AllocateUpTo call and checks its answer.
// Like allocBatchLocked, it may answer in m.blocks.
func (m *Manager[K]) allocUpToLocked(size int64, n int) ([]allocator.Block, error) {
	m.flushLocked()
	m.stats.AllocCalls++
	var blocks []allocator.Block
	var err error
	if m.alloc != nil {
		blocks, err = m.alloc.AppendUpTo(m.blocks[:0], size, n, m.cfg.Placement)
		m.blocks = blocks[:0]
	} else {
		blocks, err = m.upTo.AllocateUpTo(size, n, m.cfg.Placement)
	}
	switch {
	case err != nil && isOOM(err):
		return nil, nil
	case err != nil:
		return nil, err
	case len(blocks) > n:
		m.freeLocked(blocks)
		return nil, fmt.Errorf("l1: memory returned %d blocks for up to %d", len(blocks), n)
	case m.alloc == nil:
		if err := m.checkSizesLocked(blocks, size); err != nil {
			return nil, err
		}
	}
	return blocks, nil
}

// searchPrefixLocked is the reference binary search. It probes sizes in
// [1, n-1] (n itself just failed): a probe that fits raises the best size
// and the lower bound and is freed at once; a probe that does not lowers the
// upper bound. Then it allocates the best size. With capacity 7 and n = 10
// the probes are 5 (fits), 7 (fits), 8 (fails), then the final 7.
//
// The search is sound because fitting is monotone: all objects share one
// size, so k fit exactly when k ≤ Σ⌊extent/size⌋, and a freed probe restores
// the free extents exactly. Under the manager lock no other reservation can
// run; if the memory is shared and shrinks before the final allocation, the
// search resumes below the size that no longer fits.
func (m *Manager[K]) searchPrefixLocked(size int64, n int) ([]allocator.Block, error) {
	lo, hi := 1, n-1
	for {
		best := 0
		for lo <= hi {
			mid := lo + (hi-lo)/2
			m.stats.Probes++
			blocks, err := m.allocBatchLocked(size, mid)
			switch {
			case err == nil:
				if err := m.freeLocked(blocks); err != nil {
					return nil, err
				}
				best, lo = mid, mid+1
			case isOOM(err):
				hi = mid - 1
			default:
				return nil, err
			}
		}
		if best == 0 {
			return nil, nil
		}
		blocks, err := m.allocBatchLocked(size, best)
		switch {
		case err == nil:
			return blocks, nil
		case !isOOM(err):
			return nil, err
		}
		lo, hi = 1, best-1
	}
}
