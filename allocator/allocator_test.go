package allocator_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/invariants"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
)

const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
)

func newAlloc(t testing.TB, capacity, align int64) *allocator.Allocator {
	t.Helper()
	r, err := hostmem.NewHeapRegion(capacity)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: align})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

// TestExamples pins two worked examples of the contract: the largest
// prefix of a batch that does not fit, and a pool with every other block
// freed, where Contiguous placement gets only what one run holds.
func TestExamples(t *testing.T) {
	t.Run("up-to 10 of 8MiB in 64MiB grants 8", func(t *testing.T) {
		a := newAlloc(t, 64*MiB, 0)
		got, err := a.AllocateUpTo(8*MiB, 10, allocator.ContiguousFirst)
		require.NoError(t, err)
		require.Len(t, got, 8)
		for i, b := range got {
			assert.Equal(t, allocator.Block{Offset: int64(i) * 8 * MiB, Size: 8 * MiB, Gen: uint64(i + 1)}, b)
		}
		assert.Equal(t, uint64(1), a.Stats().PartialGrants)
		require.NoError(t, a.Verify())
	})
	t.Run("every other block freed", func(t *testing.T) {
		a := newAlloc(t, 64*MiB, 0)
		all, err := a.AllocateBatch(4*MiB, 16, allocator.Contiguous)
		require.NoError(t, err)
		for i := 0; i < 16; i += 2 {
			require.NoError(t, a.Free(all[i]))
		}
		// Freeing 9 joins 8, 9 and 10 into one run of three slots.
		require.NoError(t, a.Free(all[9]))
		st := a.Stats()
		require.Equal(t, 7, st.FreeExtents) // 0, 2, 4, 6, 8-10, 12, 14: nine slots
		require.Equal(t, 12*MiB, st.LargestFree)

		_, err = a.AllocateBatch(4*MiB, 8, allocator.Contiguous) // 32 MiB of 36 free
		require.ErrorIs(t, err, allocator.ErrOutOfMemory)
		assert.Equal(t, uint64(1), a.Stats().FailedFragmented)

		c, err := a.AllocateUpTo(4*MiB, 10, allocator.Contiguous)
		require.NoError(t, err)
		require.Len(t, c, 3, "contiguous gets only what one run holds")
		for i := 1; i < len(c); i++ {
			assert.Equal(t, c[i-1].End(), c[i].Offset)
		}
		require.NoError(t, a.Free(c...))

		s, err := a.AllocateUpTo(4*MiB, 20, allocator.Scattered)
		require.NoError(t, err)
		require.Len(t, s, 9, "scattered gets every free slot")
		assert.Zero(t, a.Stats().Free)
		require.NoError(t, a.Verify())
	})
}

// TestBadInput checks every rejected call returns a wrapped sentinel and
// leaves the allocator unchanged.
func TestBadInput(t *testing.T) {
	a := newAlloc(t, 64*MiB, 0)
	live, err := a.AllocateBatch(MiB, 4, allocator.Scattered)
	require.NoError(t, err)
	require.NoError(t, a.Free(live[1]))
	before := a.Stats()
	extents := a.FreeExtents()

	calls := []struct {
		name string
		call func() error
		want error
	}{
		{"Allocate size 0", func() error { _, err := a.Allocate(0); return err }, allocator.ErrInvalidArgument},
		{"Allocate size -1", func() error { _, err := a.Allocate(-1); return err }, allocator.ErrInvalidArgument},
		{"Allocate above capacity", func() error { _, err := a.Allocate(64*MiB + 1); return err }, allocator.ErrOutOfMemory},
		{"Allocate above capacity is invalid", func() error { _, err := a.Allocate(math.MaxInt64); return err }, allocator.ErrInvalidArgument},
		{"Batch n<0", func() error { _, err := a.AllocateBatch(MiB, -1, 0); return err }, allocator.ErrInvalidArgument},
		{"Batch size 0", func() error { _, err := a.AllocateBatch(0, 3, 0); return err }, allocator.ErrInvalidArgument},
		{"Batch overflow", func() error { _, err := a.AllocateBatch(MiB, math.MaxInt, 0); return err }, allocator.ErrInvalidArgument},
		{"Batch bad placement", func() error { _, err := a.AllocateBatch(MiB, 1, 7); return err }, allocator.ErrInvalidArgument},
		{"Batch too many", func() error { _, err := a.AllocateBatch(MiB, 100, 0); return err }, allocator.ErrOutOfMemory},
		{"UpTo n<0", func() error { _, err := a.AllocateUpTo(MiB, -5, 0); return err }, allocator.ErrInvalidArgument},
		{"UpTo above capacity", func() error { _, err := a.AllocateUpTo(65*MiB, 2, 0); return err }, allocator.ErrInvalidArgument},
		{"Free foreign", func() error { return a.Free(allocator.Block{Offset: 40 * MiB, Size: MiB, Gen: live[0].Gen}) }, allocator.ErrInvalidBlock},
		{"Free misaligned", func() error { return a.Free(allocator.Block{Offset: 1, Size: MiB}) }, allocator.ErrInvalidBlock},
		{"Free out of range", func() error { return a.Free(allocator.Block{Offset: 64 * MiB, Size: MiB}) }, allocator.ErrInvalidBlock},
		{"Free huge size", func() error { return a.Free(allocator.Block{Offset: 0, Size: math.MaxInt64}) }, allocator.ErrInvalidBlock},
		{"Free negative", func() error { return a.Free(allocator.Block{Offset: -4096, Size: 4096}) }, allocator.ErrInvalidBlock},
		{"Free zero size", func() error { return a.Free(allocator.Block{Offset: 0}) }, allocator.ErrInvalidBlock},
		{"Free short", func() error { return a.Free(allocator.Block{Offset: 0, Size: MiB / 2, Gen: live[0].Gen}) }, allocator.ErrInvalidBlock},
		{"Free long", func() error { return a.Free(allocator.Block{Offset: 2 * MiB, Size: 2 * MiB, Gen: live[2].Gen}) }, allocator.ErrInvalidBlock},
		{"Free spanning two blocks", func() error { return a.Free(allocator.Block{Offset: 2 * MiB, Size: 2 * MiB, Gen: live[2].Gen}) }, allocator.ErrInvalidBlock},
		{"Free wrong generation", func() error { return a.Free(allocator.Block{Offset: 0, Size: MiB, Gen: live[0].Gen + 100}) }, allocator.ErrInvalidBlock},
		{"Free zero generation", func() error { return a.Free(allocator.Block{Offset: 0, Size: MiB}) }, allocator.ErrInvalidBlock},
		{"Free already free", func() error { return a.Free(live[1]) }, allocator.ErrInvalidBlock},
		{"Free repeated in call", func() error { return a.Free(live[0], live[2], live[0]) }, allocator.ErrInvalidBlock},
		{"Free good then bad", func() error { return a.Free(live[0], live[2], allocator.Block{Offset: 4096, Size: 4096}) }, allocator.ErrInvalidBlock},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, c.want)
			after := a.Stats()
			after.Counters = before.Counters
			assert.Equal(t, before, after)
			assert.Equal(t, extents, a.FreeExtents())
			require.NoError(t, a.Verify())
		})
	}
	t.Run("n=0 is empty, not an error", func(t *testing.T) {
		for _, p := range allocator.Placements {
			b, err := a.AllocateBatch(MiB, 0, p)
			require.NoError(t, err)
			assert.NotNil(t, b)
			assert.Empty(t, b)
			b, err = a.AllocateUpTo(MiB, 0, p)
			require.NoError(t, err)
			assert.Empty(t, b)
		}
	})
	t.Run("bad alignment", func(t *testing.T) {
		for _, align := range []int64{-4096, 3, 4095, 4097, 6 * KiB} {
			r, err := hostmem.NewHeapRegion(MiB)
			require.NoError(t, err)
			_, err = allocator.New(r, allocator.Options{Align: align})
			require.ErrorIs(t, err, allocator.ErrInvalidArgument, "align %d", align)
		}
	})
	t.Run("error names the bad block", func(t *testing.T) {
		err := a.Free(live[0], allocator.Block{Offset: 12345, Size: 4096})
		require.ErrorIs(t, err, allocator.ErrInvalidBlock)
		assert.Contains(t, err.Error(), "block 1 {Offset: 12345, Size: 4096, Gen: 0}")
	})
}

// TestFreeOfStaleHandleIsRejected: block b is freed and the same offset
// and size are handed out again; a second Free(b) by the old holder must be
// ErrInvalidBlock and must not free the new owner's block (a review finding:
// before handle generations it freed the new block).
func TestFreeOfStaleHandleIsRejected(t *testing.T) {
	for _, single := range []bool{true, false} {
		t.Run(fmt.Sprint("single=", single), func(t *testing.T) {
			a := newAlloc(t, 64*MiB, 0)
			old, err := a.Allocate(8 * MiB)
			require.NoError(t, err)
			require.NoError(t, a.Free(old))
			var cur allocator.Block
			if single {
				cur, err = a.Allocate(8 * MiB)
			} else {
				var bs []allocator.Block
				bs, err = a.AllocateBatch(8*MiB, 2, allocator.Contiguous)
				cur = bs[0]
			}
			require.NoError(t, err)
			require.Equal(t, old.Offset, cur.Offset, "the same offset is handed out again")
			require.Equal(t, old.Size, cur.Size)
			require.NotEqual(t, old, cur, "the new handle differs from the stale one")

			before, extents := a.Stats(), a.FreeExtents()
			err = a.Free(old)
			require.ErrorIs(t, err, allocator.ErrInvalidBlock)
			assert.Contains(t, err.Error(), "stale handle")
			after := a.Stats()
			after.Counters = before.Counters
			assert.Equal(t, before, after, "a stale Free changes nothing")
			assert.Equal(t, extents, a.FreeExtents())
			require.ErrorIs(t, a.Free(cur, old), allocator.ErrInvalidBlock, "nor does it in a batch")
			require.NoError(t, a.Verify())
			require.NoError(t, a.Free(cur), "the new owner still frees its block")
		})
	}
}

// TestGenerationsCountBlocks: every block handed out gets the next
// generation, from 1; failed calls hand out none.
func TestGenerationsCountBlocks(t *testing.T) {
	a := newAlloc(t, 16*MiB, 0)
	b, err := a.Allocate(MiB)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), b.Gen)
	_, err = a.AllocateBatch(MiB, 100, allocator.Scattered)
	require.ErrorIs(t, err, allocator.ErrOutOfMemory)
	bs, err := a.AllocateUpTo(MiB, 3, allocator.Scattered)
	require.NoError(t, err)
	for i, b := range bs {
		assert.Equal(t, uint64(2+i), b.Gen)
	}
}

// TestHugeUpperBoundIsNotAnError: n is only an upper bound for Fit and
// AllocateUpTo, so math.MaxInt gives the true count, not 0 or an overflow
// error (a review finding: before the fix Fit returned 0 where 16384 fit and
// AllocateUpTo failed with ErrInvalidArgument).
func TestHugeUpperBoundIsNotAnError(t *testing.T) {
	a := newAlloc(t, 64*MiB, 0)
	assert.Equal(t, 16384, a.Fit(4*KiB, math.MaxInt))
	assert.Equal(t, 8, a.Fit(8*MiB, math.MaxInt))
	bs, err := a.AllocateUpTo(8*MiB, math.MaxInt, allocator.Scattered)
	require.NoError(t, err)
	assert.Len(t, bs, 8)
	require.NoError(t, a.Free(bs...))
	bs, err = a.AllocateUpTo(8*MiB, math.MaxInt, allocator.Contiguous)
	require.NoError(t, err)
	assert.Len(t, bs, 8)
	_, err = a.AllocateBatch(8*MiB, math.MaxInt, allocator.Scattered)
	require.ErrorIs(t, err, allocator.ErrInvalidArgument, "an all-or-nothing batch that overflows is still invalid")
}

// TestEmptyBatchAfterCloseIsErrClosed: AllocateBatch(size, 0, p) after
// Close returns ErrClosed like AllocateUpTo (a review finding: before the
// fix it returned an empty slice and nil).
func TestEmptyBatchAfterCloseIsErrClosed(t *testing.T) {
	a := newAlloc(t, MiB, 0)
	require.NoError(t, a.Close())
	for _, p := range allocator.Placements {
		_, err := a.AllocateBatch(4*KiB, 0, p)
		require.ErrorIs(t, err, allocator.ErrClosed)
		_, err = a.AllocateUpTo(4*KiB, 0, p)
		require.ErrorIs(t, err, allocator.ErrClosed)
	}
}

// TestErrorTextHasOnePrefix: every message carries "allocator:" once
// (a review finding: before the fix a size above the capacity read
// "allocator: invalid argument: allocator: out of memory: ...").
func TestErrorTextHasOnePrefix(t *testing.T) {
	a := newAlloc(t, MiB, 0)
	_, err := a.Allocate(2 * MiB)
	require.ErrorIs(t, err, allocator.ErrInvalidArgument)
	require.ErrorIs(t, err, allocator.ErrOutOfMemory)
	assert.Equal(t, 1, strings.Count(err.Error(), "allocator:"), err.Error())
	for _, call := range []func() error{
		func() error { _, err := a.AllocateBatch(MiB, 3, allocator.Contiguous); return err },
		func() error { return a.Free(allocator.Block{Offset: 4096, Size: 4096}) },
		func() error { _, err := a.AllocateBatch(0, 1, 0); return err },
	} {
		err := call()
		require.Error(t, err)
		assert.Equal(t, 1, strings.Count(err.Error(), "allocator:"), err.Error())
	}
}

// TestRegionBelongsToOneAllocator: a second New over a region that a live
// allocator carves is ErrInvalidArgument; before the fix both allocators
// handed out offset 0.
func TestRegionBelongsToOneAllocator(t *testing.T) {
	r, err := hostmem.NewHeapRegion(MiB)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	b, err := allocator.New(r, allocator.Options{})
	require.ErrorIs(t, err, allocator.ErrInvalidArgument)
	assert.Nil(t, b)
	assert.Contains(t, err.Error(), "already belongs to another allocator")
	// Another Region value over the same memory is the same region.
	_, err = allocator.New(sameMemory{r}, allocator.Options{})
	require.ErrorIs(t, err, allocator.ErrInvalidArgument)
	require.NoError(t, a.Close())

	// A new region (even one the runtime places at the old address) is
	// free to claim once the old allocator is closed.
	r2, err := hostmem.NewHeapRegion(MiB)
	require.NoError(t, err)
	c, err := allocator.New(r2, allocator.Options{})
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// sameMemory is a foreign Region implementation over another region's
// memory.
type sameMemory struct{ allocator.Region }

// TestRegionClosedBehindTheAllocatorsBack: closing the region directly makes
// every later allocator call return ErrClosed (before the fix the allocator
// kept handing out blocks of the closed region, and the first write faulted).
// It holds for this package's regions and for a foreign Region
// implementation.
func TestRegionClosedBehindTheAllocatorsBack(t *testing.T) {
	for _, foreign := range []bool{false, true} {
		t.Run(fmt.Sprint("foreign=", foreign), func(t *testing.T) {
			hr, err := hostmem.NewHeapRegion(MiB)
			require.NoError(t, err)
			var r allocator.Region = hr
			if foreign {
				r = sameMemory{hr}
			}
			a, err := allocator.New(r, allocator.Options{})
			require.NoError(t, err)
			live, err := a.Allocate(4096)
			require.NoError(t, err)
			require.NoError(t, r.Close())

			_, err = a.Allocate(4096)
			require.ErrorIs(t, err, allocator.ErrClosed)
			_, err = a.AllocateBatch(4096, 2, allocator.Scattered)
			require.ErrorIs(t, err, allocator.ErrClosed)
			_, err = a.AllocateUpTo(4096, 2, allocator.Scattered)
			require.ErrorIs(t, err, allocator.ErrClosed)
			require.ErrorIs(t, a.Free(live), allocator.ErrClosed)
			assert.Zero(t, a.Fit(4096, 1))
			assert.Nil(t, a.Bytes(live))
			require.NoError(t, a.Close())

			// The memory is no longer claimed.
			r2, err := hostmem.NewHeapRegion(MiB)
			require.NoError(t, err)
			b, err := allocator.New(r2, allocator.Options{})
			require.NoError(t, err)
			require.NoError(t, b.Close())
		})
	}
}

// TestFreeCoalescesToOneExtent frees everything in several orders and
// expects one extent spanning the capacity.
func TestFreeCoalescesToOneExtent(t *testing.T) {
	orders := map[string]func([]allocator.Block){
		"forward": func([]allocator.Block) {},
		"reverse": func(b []allocator.Block) {
			for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
				b[i], b[j] = b[j], b[i]
			}
		},
		"shuffled": func(b []allocator.Block) {
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		},
	}
	for name, reorder := range orders {
		t.Run(name, func(t *testing.T) {
			a := newAlloc(t, 32*MiB, 0)
			bs, err := a.AllocateBatch(64*KiB, 512, allocator.Contiguous)
			require.NoError(t, err)
			reorder(bs)
			require.NoError(t, a.Free(bs[:100]...))
			require.NoError(t, a.Verify())
			require.NoError(t, a.Free(bs[100:]...))
			st := a.Stats()
			assert.Equal(t, 1, st.FreeExtents)
			assert.Equal(t, st.Capacity, st.LargestFree)
			require.NoError(t, a.Verify())
		})
	}
}

// TestDifferential runs thousands of random operations under every
// placement against the bitmap reference and checks, after each one, the
// allocator's invariants and its agreement with the allocref.
func TestDifferential(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runDifferential(t, seed, 2500)
		})
	}
}

// TestDifferential8MiB is TestDifferential at production scale: objects of
// 1, 8 (mostly) and 40 MiB, and a few bytes off, in batches of up to 1200
// on a 44.5 GiB pool (5700 × 8 MiB) over a MAP_NORESERVE mapping.
func TestDifferential8MiB(t *testing.T) {
	const capacity = 5700 * 8 * MiB
	r, err := hostmem.NewMmapRegion(capacity, hostmem.MmapOptions{NoReserve: true})
	if err != nil {
		t.Skipf("44.5 GiB NoReserve pool unavailable: %v", err)
	}
	r.Close()
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r, err := hostmem.NewMmapRegion(capacity, hostmem.MmapOptions{NoReserve: true})
			require.NoError(t, err)
			a, err := allocator.New(r, allocator.Options{})
			require.NoError(t, err)
			t.Cleanup(func() { a.Close() })
			runDifferentialOn(t, a, diffConfig{
				align: allocator.DefaultAlign, capacity: capacity, maxN: 1200,
				sizes: []int64{8 * MiB, 8 * MiB, 8 * MiB, 8*MiB + 1, 8*MiB - 4096, MiB, 40 * MiB},
			}, seed, 300)
		})
	}
}

// diffConfig is the pool and the requests of a differential run.
type diffConfig struct {
	align, capacity int64
	sizes           []int64
	maxN            int // batches of 0 to maxN-1 objects
}

func runDifferential(t *testing.T, seed uint64, ops int) {
	const align = 4 * KiB
	capacity := 256 * align
	runDifferentialOn(t, newAlloc(t, capacity, align), diffConfig{
		align: align, capacity: capacity, maxN: 12,
		sizes: []int64{1, align, align + 1, 3 * align, 5 * align, 16 * align},
	}, seed, ops)
}

// runDifferentialOn runs ops random operations on a, a fresh allocator of
// cfg's pool, against the reference model.
func runDifferentialOn(t *testing.T, a *allocator.Allocator, cfg diffConfig, seed uint64, ops int) {
	align := cfg.align
	ref := allocref.NewAlloc(cfg.capacity, align)
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	var live, freed []allocator.Block
	sizes := cfg.sizes

	for op := 0; op < ops; op++ {
		size := sizes[rng.IntN(len(sizes))]
		n := rng.IntN(cfg.maxN)
		p := allocator.Placements[rng.IntN(3)]
		var desc string
		switch k := rng.IntN(10); {
		case k < 2:
			desc = fmt.Sprintf("Allocate(%d)", size)
			want := ref.BestFit(size)
			b, err := a.Allocate(size)
			if want < 0 {
				require.ErrorIs(t, err, allocator.ErrOutOfMemory, desc)
				break
			}
			require.NoError(t, err, desc)
			require.Equal(t, want, b.Offset, "%s: not the best fit", desc)
			require.Equal(t, ref.Units(size)*align, b.Size)
			require.NoError(t, ref.Take([]allocator.Block{b}), desc)
			live = append(live, b)
		case k < 4:
			desc = fmt.Sprintf("AllocateBatch(%d, %d, %v)", size, n, p)
			fits := ref.MaxSlots(size, n) == n
			if p == allocator.Contiguous {
				fits = ref.MaxRun(size, n) == n
			}
			bs, err := a.AllocateBatch(size, n, p)
			if !fits {
				require.ErrorIs(t, err, allocator.ErrOutOfMemory, desc)
				break
			}
			require.NoError(t, err, desc)
			require.Len(t, bs, n, desc)
			checkShape(t, desc, bs, p, ref.MaxRun(size, n) == n)
			require.NoError(t, ref.Take(bs), desc)
			live = append(live, bs...)
		case k < 6:
			desc = fmt.Sprintf("AllocateUpTo(%d, %d, %v)", size, n, p)
			want := ref.MaxSlots(size, n)
			if p == allocator.Contiguous {
				want = ref.MaxRun(size, n)
			}
			oneRun := ref.MaxRun(size, want) == want
			bs, err := a.AllocateUpTo(size, n, p)
			require.NoError(t, err, desc)
			require.Len(t, bs, want, "%s: not the maximum", desc)
			checkShape(t, desc, bs, p, oneRun)
			require.NoError(t, ref.Take(bs), desc)
			live = append(live, bs...)
		case k < 7:
			desc = fmt.Sprintf("Fit(%d, %d)", size, n)
			require.Equal(t, ref.MaxSlots(size, n), a.Fit(size, n), desc)
		default:
			// Free a random subset, sometimes corrupted.
			if len(live) == 0 {
				continue
			}
			rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
			m := 1 + rng.IntN(min(len(live), max(6, cfg.maxN)))
			req := append([]allocator.Block(nil), live[:m]...)
			switch rng.IntN(7) {
			case 3:
				if len(freed) > 0 { // a stale handle
					req = append(req, freed[rng.IntN(len(freed))])
				}
			case 0:
				req = append(req, req[0]) // repeated
			case 1:
				req[rng.IntN(m)].Size += align // wrong size
			case 2:
				req[rng.IntN(m)].Offset += align / 2 // misaligned
			}
			desc = fmt.Sprintf("Free(%v)", req)
			err := a.Free(req...)
			if !ref.Valid(req) {
				require.ErrorIs(t, err, allocator.ErrInvalidBlock, desc)
				break
			}
			require.NoError(t, err, desc)
			ref.Release(req)
			live = live[m:]
			freed = append(freed, req...)
		}
		require.NoError(t, ref.CompareView(a), "after op %d %s", op, desc)
	}
	require.NoError(t, a.Free(live...))
	st := a.Stats()
	require.Equal(t, 1, st.FreeExtents)
	require.Equal(t, st.Capacity, st.LargestFree)
	require.NoError(t, a.Verify())
}

// checkShape checks placement: a contiguous batch ascends without gaps,
// and a contiguous-first batch does too whenever one run could hold it.
func checkShape(t *testing.T, desc string, bs []allocator.Block, p allocator.Placement, oneRunPossible bool) {
	t.Helper()
	if p == allocator.Scattered || (p == allocator.ContiguousFirst && !oneRunPossible) {
		return
	}
	for i := 1; i < len(bs); i++ {
		require.Equal(t, bs[i-1].End(), bs[i].Offset, "%s: block %d does not follow block %d", desc, i, i-1)
	}
}

// TestConcurrent hammers one allocator from many goroutines under -race.
func TestConcurrent(t *testing.T) {
	a := newAlloc(t, 64*MiB, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range 300 {
				n := 1 + rng.IntN(8)
				bs, err := a.AllocateUpTo(64*KiB*int64(1+rng.IntN(4)), n, allocator.Placements[rng.IntN(3)])
				if err != nil {
					assert.NoError(t, err)
					return
				}
				_ = a.Stats()
				_ = a.Fit(64*KiB, 4)
				if len(bs) > 0 {
					a.Bytes(bs[0])[0] = byte(g)
				}
				if err := a.Free(bs...); err != nil {
					assert.NoError(t, err)
					return
				}
			}
		})
	}
	wg.Wait()
	st := a.Stats()
	assert.Equal(t, 1, st.FreeExtents)
	assert.Zero(t, st.Used)
	require.NoError(t, a.Verify())
}

func TestCloseAndBytes(t *testing.T) {
	r, err := hostmem.NewHeapRegion(MiB)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	b, err := a.Allocate(100)
	require.NoError(t, err)
	assert.Equal(t, allocator.Block{Offset: 0, Size: 4096, Gen: 1}, b)
	buf := a.Bytes(b)
	require.Len(t, buf, 4096)
	assert.Nil(t, a.Bytes(allocator.Block{Offset: MiB - 4096, Size: 8192}))
	require.NoError(t, a.Close())
	require.NoError(t, a.Close())
	assert.Nil(t, a.Bytes(b))
	_, err = a.Allocate(100)
	require.ErrorIs(t, err, allocator.ErrClosed)
	require.ErrorIs(t, a.Free(b), allocator.ErrClosed)
	assert.Zero(t, a.Fit(100, 1))
	assert.Nil(t, r.Bytes(), "Close closes the region")
}

// TestZeroAllocs asserts that single-block Allocate and Free allocate
// nothing, and that a batch with a caller-provided slice allocates nothing.
func TestZeroAllocs(t *testing.T) {
	if invariants.Enabled {
		t.Skip("the invariants build verifies after every call, and Verify allocates")
	}
	a := newAlloc(t, 256*MiB, 0)
	// Fragment a little so the index is not trivial.
	bs, err := a.AllocateBatch(MiB, 64, allocator.Contiguous)
	require.NoError(t, err)
	for i := 0; i < len(bs); i += 2 {
		require.NoError(t, a.Free(bs[i]))
	}
	single := testing.AllocsPerRun(1000, func() {
		b, err := a.Allocate(8 * MiB)
		if err != nil {
			panic(err)
		}
		if err := a.Free(b); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, single, "allocs per Allocate+Free")
	dst := make([]allocator.Block, 0, 16)
	batch := testing.AllocsPerRun(1000, func() {
		out, err := a.AppendBatch(dst[:0], 4*MiB, 16, allocator.Scattered)
		if err != nil {
			panic(err)
		}
		if err := a.Free(out...); err != nil {
			panic(err)
		}
	})
	assert.Zero(t, batch, "allocs per AppendBatch+Free with a caller slice")
	fresh := testing.AllocsPerRun(100, func() {
		out, err := a.AllocateBatch(4*MiB, 16, allocator.Scattered)
		if err != nil {
			panic(err)
		}
		if err := a.Free(out...); err != nil {
			panic(err)
		}
	})
	assert.Equal(t, 1.0, fresh, "AllocateBatch allocates exactly its result slice")
}

func TestPlacementNames(t *testing.T) {
	for _, p := range allocator.Placements {
		q, err := allocator.ParsePlacement(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, q)
	}
	_, err := allocator.ParsePlacement("best")
	assert.True(t, errors.Is(err, allocator.ErrInvalidArgument))
}

// TestBulkFreeRejectedMidCallChangesNothing is the late actor at production
// size: 5700 objects of 8 MiB fill a 44.5 GiB NoReserve pool; one holder
// frees and another reallocates 100 of them, and a late Free of all 5700
// old handles, listed every other one first (as eviction lists victims),
// reaches a stale one deep in the call. The whole Free is rejected with
// ErrInvalidBlock naming that handle, and nothing changes: the same stats
// and free extents, every invariant, every old handle still live and the
// new owners' handles still theirs. It runs through the bulk path (5700
// entries marked and purged), the repeated block and the out-of-range one
// too.
func TestBulkFreeRejectedMidCallChangesNothing(t *testing.T) {
	const n, size = 5700, 8 * MiB
	r, err := hostmem.NewMmapRegion(n*size, hostmem.MmapOptions{NoReserve: true})
	if err != nil {
		t.Skipf("44.5 GiB NoReserve pool unavailable: %v", err)
	}
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	blocks, err := a.AllocateBatch(size, n, allocator.Scattered)
	require.NoError(t, err)
	// Another actor frees 100 and gets them back: those old handles are stale.
	require.NoError(t, a.Free(blocks[3000:3100]...))
	again, err := a.AllocateBatch(size, 100, allocator.Scattered)
	require.NoError(t, err)

	var order []allocator.Block // every other one first
	for _, parity := range []int{0, 1} {
		for i := parity; i < n; i += 2 {
			order = append(order, blocks[i])
		}
	}
	bad := map[string]func([]allocator.Block) ([]allocator.Block, string){
		"stale": func(bs []allocator.Block) ([]allocator.Block, string) { return bs, "stale handle" },
		"repeated": func(bs []allocator.Block) ([]allocator.Block, string) {
			live := slices.DeleteFunc(slices.Clone(bs), func(b allocator.Block) bool { return slices.Contains(blocks[3000:3100], b) })
			return append(live, live[4000]), "repeated in this call"
		},
		"out of range": func(bs []allocator.Block) ([]allocator.Block, string) {
			live := slices.DeleteFunc(slices.Clone(bs), func(b allocator.Block) bool { return slices.Contains(blocks[3000:3100], b) })
			return slices.Insert(live, 5000, allocator.Block{Offset: n * size, Size: size}), "out of range"
		},
	}
	for name, mk := range bad {
		t.Run(name, func(t *testing.T) {
			call, why := mk(order)
			before, extents := a.Stats(), a.FreeExtents()
			err := a.Free(call...)
			require.ErrorIs(t, err, allocator.ErrInvalidBlock)
			assert.Contains(t, err.Error(), why)
			after := a.Stats()
			after.Counters = before.Counters
			assert.Equal(t, before, after, "a rejected Free changes nothing")
			assert.Equal(t, extents, a.FreeExtents())
			require.NoError(t, a.Verify())
		})
	}
	// Every handle that was live still is: the new owners free theirs,
	// then the first holder frees the rest, out of order, in one call.
	require.NoError(t, a.Free(again...))
	live := slices.DeleteFunc(order, func(b allocator.Block) bool { return slices.Contains(blocks[3000:3100], b) })
	require.NoError(t, a.Free(live...))
	st := a.Stats()
	require.Equal(t, 1, st.FreeExtents)
	require.Equal(t, st.Capacity, st.LargestFree)
	require.NoError(t, a.Verify())
}

// stateless is a Region that breaks the contract: State returns nil.
type stateless struct{ allocator.Region }

func (stateless) State() *allocator.RegionState { return nil }

// TestRegionWithoutStateIsRejected: New refuses a Region whose State is
// nil, since it could not tell when the region is closed, and changes
// nothing: the region stays usable by a conforming allocator.
func TestRegionWithoutStateIsRejected(t *testing.T) {
	r, err := hostmem.NewHeapRegion(MiB)
	require.NoError(t, err)
	a, err := allocator.New(stateless{r}, allocator.Options{})
	require.ErrorIs(t, err, allocator.ErrInvalidArgument)
	assert.Nil(t, a)
	assert.Contains(t, err.Error(), "Region.State returned nil")
	a, err = allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	require.NoError(t, a.Close())
}
