package allocref

import "github.com/kvalloc/kvalloc/allocator"

// This file models the allocator's documented placement policy (see the
// allocator package doc), so that a model can predict the exact blocks a
// call returns, not only how many:
//
//   - Allocate takes the best fit: the smallest free run that holds the
//     object, the lowest address among equals, carved from its front.
//   - A contiguous run of k objects is carved from the front of the best-fit
//     run for all k.
//   - A scattered batch takes the best-fit run for one object, carves as
//     many objects from its front as it holds (up to what is still needed),
//     and repeats.
//   - ContiguousFirst is one run when some run holds the batch, scattered
//     otherwise.
//
// Generations are predicted too: the blocks of a plan carry the next
// generations in order (see Alloc). The Plan functions only compute; feed
// their answer to Take to apply it.

// PlanAllocate returns the block Allocate(size) would return, or false if
// nothing fits. size must be positive.
func (r *Alloc) PlanAllocate(size int64) (allocator.Block, bool) {
	off := r.BestFit(size)
	if off < 0 {
		return allocator.Block{}, false
	}
	return allocator.Block{Offset: off, Size: r.Units(size) * r.Align, Gen: r.nextGen(0)}, true
}

// PlanBatch returns the blocks AllocateBatch(size, n, p) would return, or
// false if the batch does not fit. size must be positive and n ≥ 0.
func (r *Alloc) PlanBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, bool) {
	if n == 0 {
		return []allocator.Block{}, true
	}
	if p != allocator.Scattered {
		if off := r.BestFit(r.Units(size) * r.Align * int64(n)); off >= 0 {
			return r.carve(off, size, n, r.nextGen(0)), true
		}
		if p == allocator.Contiguous {
			return nil, false
		}
	}
	if r.MaxSlots(size, n) < n {
		return nil, false
	}
	return r.scatter(size, n), true
}

// PlanUpTo returns the blocks AllocateUpTo(size, n, p) would return: the
// largest k ≤ n that fits (MaxSlots, or MaxRun for Contiguous), placed as
// PlanBatch places k objects. size must be positive and n ≥ 0.
func (r *Alloc) PlanUpTo(size int64, n int, p allocator.Placement) []allocator.Block {
	k := r.MaxSlots(size, n)
	if p == allocator.Contiguous {
		k = r.MaxRun(size, n)
	}
	bs, ok := r.PlanBatch(size, k, p)
	if !ok {
		panic("allocref: PlanUpTo: the maximum does not fit")
	}
	return bs
}

// carve returns n objects from off on, the first with generation gen.
func (r *Alloc) carve(off, size int64, n int, gen uint64) []allocator.Block {
	s := r.Units(size) * r.Align
	out := make([]allocator.Block, n)
	for i := range out {
		out[i] = allocator.Block{Offset: off + int64(i)*s, Size: s}
		if gen != 0 {
			out[i].Gen = gen + uint64(i)
		}
	}
	return out
}

// scatter carves n objects best-fit run first, on a scratch list of runs.
func (r *Alloc) scatter(size int64, n int) []allocator.Block {
	s := r.Units(size)
	runs := r.Runs()
	out := make([]allocator.Block, 0, n)
	for len(out) < n {
		best := -1
		for i, x := range runs {
			if x[1] >= s && (best < 0 || x[1] < runs[best][1]) {
				best = i
			}
		}
		take := min(int64(n-len(out)), runs[best][1]/s)
		out = append(out, r.carve(runs[best][0]*r.Align, size, int(take), r.nextGen(len(out)))...)
		runs[best][0] += take * s
		runs[best][1] -= take * s
	}
	return out
}

// nextGen returns the generation of the i-th block of the next call, or 0
// under NoGen.
func (r *Alloc) nextGen(i int) uint64 {
	if r.NoGen {
		return 0
	}
	return r.gen + 1 + uint64(i)
}
