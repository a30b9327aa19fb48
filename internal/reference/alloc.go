package reference

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
)

// Alloc models an allocator as one bool per alignment unit plus the set of
// live blocks. Every query is a linear scan.
type Alloc struct {
	Align int64
	used  []bool
	live  map[int64]int64 // offset -> size, bytes
}

// NewAlloc models a pool of capacity bytes (a multiple of align).
func NewAlloc(capacity, align int64) *Alloc {
	return &Alloc{Align: align, used: make([]bool, capacity/align), live: map[int64]int64{}}
}

// Units rounds size up to alignment units.
func (r *Alloc) Units(size int64) int64 { return (size + r.Align - 1) / r.Align }

// Runs returns the maximal free runs as [start, length) pairs in units, in
// address order.
func (r *Alloc) Runs() [][2]int64 {
	var runs [][2]int64
	for u := int64(0); u < int64(len(r.used)); {
		if r.used[u] {
			u++
			continue
		}
		s := u
		for u < int64(len(r.used)) && !r.used[u] {
			u++
		}
		runs = append(runs, [2]int64{s, u - s})
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

// Take marks blocks live, failing if any is misaligned, out of range or
// overlaps memory already in use. The real allocator's answers are fed
// through Take, so any overlap or range error is caught here.
func (r *Alloc) Take(blocks []allocator.Block) error {
	for i, b := range blocks {
		if b.Offset%r.Align != 0 || b.Size%r.Align != 0 || b.Size <= 0 {
			return fmt.Errorf("block %d %+v misaligned", i, b)
		}
		lo, hi := b.Offset/r.Align, (b.Offset+b.Size)/r.Align
		if lo < 0 || hi > int64(len(r.used)) {
			return fmt.Errorf("block %d %+v out of range", i, b)
		}
		for u := lo; u < hi; u++ {
			if r.used[u] {
				return fmt.Errorf("block %d %+v overlaps used unit %d", i, b, u)
			}
			r.used[u] = true
		}
		r.live[b.Offset] = b.Size
	}
	return nil
}

// Valid reports whether Free(blocks...) must succeed: every block is live,
// exactly, and none repeats.
func (r *Alloc) Valid(blocks []allocator.Block) bool {
	seen := map[int64]bool{}
	for _, b := range blocks {
		if size, ok := r.live[b.Offset]; !ok || size != b.Size || seen[b.Offset] {
			return false
		}
		seen[b.Offset] = true
	}
	return true
}

// Release frees blocks that Valid accepted.
func (r *Alloc) Release(blocks []allocator.Block) {
	for _, b := range blocks {
		for u := b.Offset / r.Align; u < (b.Offset+b.Size)/r.Align; u++ {
			r.used[u] = false
		}
		delete(r.live, b.Offset)
	}
}

// Live returns the live blocks in no particular order.
func (r *Alloc) Live() []allocator.Block {
	out := make([]allocator.Block, 0, len(r.live))
	for o, s := range r.live {
		out = append(out, allocator.Block{Offset: o, Size: s})
	}
	return out
}
