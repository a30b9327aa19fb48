// Package baseline holds LMCache's two answers to a batch that does not
// fit, as l1.Memory wrappers, so that the benchmarks, the scenarios and
// the harness keep measuring them beside l1's own: the binary search of
// LMCache's largest-prefix fix, which finds the largest prefix with trial
// allocations, and LMCache's behaviour before that fix, all or nothing.
// The manager always asks its memory for the prefix with one AppendUpTo
// call (the one-pass strategy, over the allocator itself); a wrapper
// answers that call the baseline's way, through the memory under it.
//
// Nothing outside the test and benchmark harness imports it.
package baseline

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Strategy names how ReserveWrite's largest prefix is found: the axis the
// benchmarks (strategy=S), the scenarios' matrix and the harness run over.
type Strategy uint8

const (
	// OnePass is l1's own: one AppendUpTo call to the memory itself.
	OnePass Strategy = iota
	// BinarySearch is the search of LMCache's largest-prefix fix (see Search).
	BinarySearch
	// None is LMCache before the fix: all or nothing (see AllOrNothing).
	None
)

// Strategies lists every strategy, for the tests and benchmarks that run
// once per strategy.
var Strategies = []Strategy{OnePass, BinarySearch, None}

var names = [...]string{OnePass: "onepass", BinarySearch: "binarysearch", None: "none"}

// String returns "onepass", "binarysearch" or "none": the benchmarks',
// scenarios' and trace's row names.
func (s Strategy) String() string {
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// Wrap returns mem as a manager under strategy s sees it: mem itself for
// OnePass, a Search or an AllOrNothing over it otherwise. preflight is
// theirs (see Search.Preflight): set it for a manager with on-demand
// eviction.
func (s Strategy) Wrap(mem l1.Memory, preflight bool) l1.Memory {
	switch s {
	case BinarySearch:
		return &Search{counted: counted{Memory: mem, Preflight: preflight}}
	case None:
		return &AllOrNothing{counted: counted{Memory: mem, Preflight: preflight}}
	}
	return mem
}

// Counts are what a baseline wrapper counts of the calls it makes to the
// memory under it.
type Counts struct {
	// Calls counts allocation calls (AppendBatch, AppendUpTo,
	// AppendReissue), the ones the manager passes through included: what
	// l1.Stats.AllocCalls counts over the memory itself.
	Calls uint64
	// Probes counts the search's trial allocations, each allocated and
	// freed at once: not the failed full call, not the final allocation.
	Probes uint64
}

// Counter is a baseline wrapper's view of its counts.
type Counter interface{ Counts() Counts }

// counted is the part the wrappers share: the memory under them, which
// answers every call but AppendUpTo, the counts, and the full call.
type counted struct {
	l1.Memory
	// Preflight makes the full call only when the memory reports that it
	// fits (Fit, or the largest free extent under Contiguous placement),
	// and answers a size above the capacity without any call. A manager
	// with on-demand eviction asks for a prefix only after its count
	// found that the whole batch does not fit, and before the Memory
	// contract held every strategy it skipped the failed full call there
	// (LMCache's preflight check of Fit); without eviction the full call
	// comes first, as in LMCache.
	Preflight     bool
	calls, probes atomic.Uint64
}

// Counts returns the counts so far.
func (c *counted) Counts() Counts { return Counts{Calls: c.calls.Load(), Probes: c.probes.Load()} }

// Capacity reports no bound: LMCache's allocator reports none, so the
// manager bounds nothing before it asks, and every missing key reaches
// the baseline's search.
func (c *counted) Capacity() int64 { return math.MaxInt64 }

// AppendBatch passes the call on, counting it.
func (c *counted) AppendBatch(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	c.calls.Add(1)
	return c.Memory.AppendBatch(dst, size, n, p)
}

// AppendReissue passes the call on, counting it.
func (c *counted) AppendReissue(dst []allocator.Block, blocks []allocator.Block) ([]allocator.Block, error) {
	c.calls.Add(1)
	return c.Memory.AppendReissue(dst, blocks)
}

// full makes the batch's full call: done reports that the answer is
// final (the blocks, a size that never fits, or an error other than out
// of memory); otherwise the batch does not fit as a whole.
func (c *counted) full(dst []allocator.Block, size int64, n int, p allocator.Placement) (blocks []allocator.Block, done bool, err error) {
	if c.Preflight {
		if size > c.Memory.Capacity() {
			return dst, true, fmt.Errorf("baseline: %d bytes exceed the capacity: %w", size, errNeverFits)
		}
		if !c.fits(size, n, p) {
			return dst, false, nil
		}
	}
	blocks, err = c.AppendBatch(dst, size, n, p)
	switch {
	case err == nil:
		return blocks, true, nil
	case !errors.Is(err, allocator.ErrOutOfMemory) || errors.Is(err, allocator.ErrInvalidArgument):
		return dst, true, err
	}
	return dst, false, nil
}

// errNeverFits is what the allocator's error for a size above its
// capacity wraps: both sentinels.
var errNeverFits = fmt.Errorf("%w (%w)", allocator.ErrOutOfMemory, allocator.ErrInvalidArgument)

// fits reports whether the memory says n objects of size bytes fit now.
func (c *counted) fits(size int64, n int, p allocator.Placement) bool {
	if p == allocator.Contiguous {
		z := (size + c.Align() - 1) / c.Align() * c.Align()
		return c.Stats().LargestFree/z >= int64(n)
	}
	return c.Fit(size, n) >= n
}

// Search is a Memory whose AppendUpTo finds the largest prefix as LMCache's
// largest-prefix fix does: the full call, then a binary search of [1, n-1] with
// all-or-nothing probes, each allocated and freed at once, then the
// largest size that fit. A probe that fits raises the best size and the
// lower bound; one that does not lowers the upper bound. With capacity 7
// and n = 10 the probes are 5 (fits), 7 (fits), 8 (fails), then the final
// 7: about log2(n) probes of up to n objects each (13 for n = 5700).
//
// The search is sound because fitting is monotone: all objects share one
// size, so k fit exactly when k ≤ Σ⌊extent/size⌋, and a freed probe
// restores the free extents exactly. If the memory is shared and shrinks
// before the final allocation, the search resumes below the size that no
// longer fits.
type Search struct{ counted }

// AppendUpTo appends the largest prefix of n objects that fits, found by
// the search.
func (s *Search) AppendUpTo(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	if blocks, done, err := s.full(dst, size, n, p); done {
		return blocks, err
	}
	lo, hi := 1, n-1
	for {
		best := 0
		for lo <= hi {
			mid := lo + (hi-lo)/2
			s.probes.Add(1)
			blocks, err := s.AppendBatch(dst, size, mid, p)
			switch {
			case err == nil:
				if err := s.Free(blocks[len(dst):]...); err != nil {
					return dst, fmt.Errorf("baseline: free a probe of %d: %w", mid, err)
				}
				best, lo = mid, mid+1
			case errors.Is(err, allocator.ErrOutOfMemory):
				hi = mid - 1
			default:
				return dst, err
			}
		}
		if best == 0 {
			return dst, nil
		}
		blocks, err := s.AppendBatch(dst, size, best, p)
		switch {
		case err == nil:
			return blocks, nil
		case !errors.Is(err, allocator.ErrOutOfMemory):
			return dst, err
		}
		lo, hi = 1, best-1
	}
}

// AllOrNothing is a Memory whose AppendUpTo grants all n objects or none:
// LMCache before the fix, every key of a batch that does not fit whole
// OutOfMemory.
type AllOrNothing struct{ counted }

// AppendUpTo appends n blocks, or none when they do not all fit.
func (a *AllOrNothing) AppendUpTo(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	blocks, _, err := a.full(dst, size, n, p)
	return blocks, err
}

// The wrappers are Memories with counts.
var (
	_ l1.Memory = (*Search)(nil)
	_ l1.Memory = (*AllOrNothing)(nil)
	_ Counter   = (*Search)(nil)
	_ Counter   = (*AllOrNothing)(nil)
)
