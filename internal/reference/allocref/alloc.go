package allocref

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
)

// Alloc models an allocator as the list of its live blocks in address
// order; the free runs are the gaps between them. Every query is a linear
// scan over the live blocks, so the model costs the same for a 64-unit pool
// as for a 45 GiB one of 8 MiB blocks.
//
// Generations are modelled exactly: the allocator hands out generation
// g+1, g+2, ... to the blocks of each successful call, in the order it
// returns them, where g is the last generation handed out. Take checks the
// real allocator's blocks against that rule, so a generation that is
// reused or skipped is caught, and Valid accepts a block only with its
// live generation, so a stale handle is invalid.
type Alloc struct {
	Align int64
	// NoGen turns generations off: plans carry Gen 0 and Take accepts any
	// generation, recording 0. A model of a client of the allocator (the L1
	// model) sets it, because such a client may probe the allocator (a
	// binary search allocates and frees) in ways the model does not
	// mirror, so it cannot predict generations; it compares handles with
	// WithoutGen.
	NoGen bool
	units int64
	live  []allocator.Block // sorted by offset, disjoint
	gen   uint64            // the last generation handed out
}

// NewAlloc models a pool of capacity bytes (a multiple of align).
func NewAlloc(capacity, align int64) *Alloc {
	return &Alloc{Align: align, units: capacity / align}
}

// Units rounds size up to alignment units.
func (r *Alloc) Units(size int64) int64 { return (size + r.Align - 1) / r.Align }

// Gen returns the last generation handed out (0 before the first block).
func (r *Alloc) Gen() uint64 { return r.gen }

// Runs returns the maximal free runs as [start, length) pairs in units, in
// address order.
func (r *Alloc) Runs() [][2]int64 {
	var runs [][2]int64
	next := int64(0)
	for _, b := range r.live {
		if u := b.Offset / r.Align; u > next {
			runs = append(runs, [2]int64{next, u - next})
		}
		next = b.End() / r.Align
	}
	if next < r.units {
		runs = append(runs, [2]int64{next, r.units - next})
	}
	return runs
}

// FreeBytes is the number of free bytes.
func (r *Alloc) FreeBytes() int64 {
	var n int64
	for _, x := range r.Runs() {
		n += x[1]
	}
	return n * r.Align
}

// Largest is the largest free run in bytes.
func (r *Alloc) Largest() int64 {
	var m int64
	for _, x := range r.Runs() {
		m = max(m, x[1])
	}
	return m * r.Align
}

// MaxSlots is min(n, Σ⌊run/size⌋): the most objects of size bytes that
// fit, each in one piece.
func (r *Alloc) MaxSlots(size int64, n int) int {
	s := r.Units(size)
	var k int64
	for _, x := range r.Runs() {
		k += x[1] / s
	}
	return int(min(k, int64(n)))
}

// MaxRun is min(n, ⌊largest run/size⌋): the most objects that fit in one run.
func (r *Alloc) MaxRun(size int64, n int) int {
	return int(min(int64(n), r.Largest()/(r.Units(size)*r.Align)))
}

// BestFit returns the offset of the smallest free run of at least size
// bytes, the lowest address among equals, or -1.
func (r *Alloc) BestFit(size int64) int64 {
	s, best, bestLen := r.Units(size), int64(-1), int64(0)
	for _, x := range r.Runs() {
		if x[1] >= s && (best < 0 || x[1] < bestLen) {
			best, bestLen = x[0], x[1]
		}
	}
	if best < 0 {
		return -1
	}
	return best * r.Align
}

// find returns where a block at offset off is, or would be, in r.live.
func (r *Alloc) find(off int64) (int, bool) {
	return slices.BinarySearchFunc(r.live, off, func(b allocator.Block, off int64) int { return cmp.Compare(b.Offset, off) })
}

// Take marks the blocks of one successful call live, failing if any is
// misaligned, out of range, overlaps memory already in use, or does not
// carry the next generation. The real allocator's answers are fed through
// Take, so any overlap, range or generation error is caught here. It costs
// O((L + k) log(L + k)) for k blocks, so batches of thousands stay cheap.
func (r *Alloc) Take(blocks []allocator.Block) error {
	gen := r.gen
	for i, b := range blocks {
		if b.Offset%r.Align != 0 || b.Size%r.Align != 0 || b.Size <= 0 {
			return fmt.Errorf("block %d %+v misaligned", i, b)
		}
		if b.Offset < 0 || b.End() > r.units*r.Align {
			return fmt.Errorf("block %d %+v out of range", i, b)
		}
		if r.NoGen {
			continue
		}
		if b.Gen != gen+1 {
			return fmt.Errorf("block %d %+v has generation %d, want %d (the next one; a reused generation lets a stale handle free a new block)", i, b, b.Gen, gen+1)
		}
		gen++
	}
	merged := append(slices.Clone(r.live), blocks...)
	if r.NoGen {
		for i := len(r.live); i < len(merged); i++ {
			merged[i].Gen = 0
		}
	}
	slices.SortStableFunc(merged, func(x, y allocator.Block) int { return cmp.Compare(x.Offset, y.Offset) })
	for i := 1; i < len(merged); i++ {
		if merged[i-1].End() > merged[i].Offset {
			return fmt.Errorf("block %+v overlaps block %+v", merged[i], merged[i-1])
		}
	}
	r.live, r.gen = merged, gen
	return nil
}

// Valid reports whether Free(blocks...) must succeed: every block is live,
// exactly (offset, size and generation), and none repeats.
func (r *Alloc) Valid(blocks []allocator.Block) bool {
	seen := make(map[allocator.Block]bool, len(blocks))
	for _, b := range blocks {
		if !r.IsLive(b) || seen[b] {
			return false
		}
		seen[b] = true
	}
	return true
}

// Release frees blocks that Valid accepted.
func (r *Alloc) Release(blocks []allocator.Block) {
	gone := make(map[int64]bool, len(blocks))
	for _, b := range blocks {
		gone[b.Offset] = true
	}
	r.live = slices.DeleteFunc(r.live, func(b allocator.Block) bool { return gone[b.Offset] })
}

// WithoutGen returns b with its generation cleared: the part of a handle
// a NoGen model predicts.
func WithoutGen(b allocator.Block) allocator.Block {
	b.Gen = 0
	return b
}

// Live returns the live blocks in address order.
func (r *Alloc) Live() []allocator.Block { return slices.Clone(r.live) }

// IsLive reports whether b is exactly a live block of the model, its
// generation included.
func (r *Alloc) IsLive(b allocator.Block) bool {
	j, ok := r.find(b.Offset)
	return ok && r.live[j] == b
}

// Capacity is the modelled capacity in bytes.
func (r *Alloc) Capacity() int64 { return r.units * r.Align }

// Clone returns an independent copy of the model.
func (r *Alloc) Clone() *Alloc {
	c := *r
	c.live = slices.Clone(r.live)
	return &c
}
