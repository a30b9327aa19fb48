package allocator_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
)

// The single-block Allocate and Free have their own hot paths
// (allocator.go): Allocate carves the best-fit extent in place when it
// keeps its place in the size treap, and Free merges in place with exactly
// one free neighbour. These tests drive every branch of both, in a region
// of 16 blocks of 16 KiB, and compare the free extents, in blocks, with the
// ones worked out by hand.

const slot = 16 * KiB // one block of the layouts below

// layout returns an allocator over 16 blocks, all live, then frees the
// blocks listed (one call per block, so they merge as they go). It returns
// the handles of the 16 blocks.
func layout(t *testing.T, free ...int) (*allocator.Allocator, []allocator.Block) {
	t.Helper()
	a := newAlloc(t, 16*slot, 0)
	bs, err := a.AllocateBatch(slot, 16, allocator.Contiguous)
	require.NoError(t, err)
	for _, i := range free {
		require.NoError(t, a.Free(bs[i]))
	}
	require.NoError(t, a.Verify())
	return a, bs
}

// extentsInBlocks returns the free extents as [first, end) block ranges.
func extentsInBlocks(a *allocator.Allocator) [][2]int64 {
	var out [][2]int64
	for _, e := range a.FreeExtents() {
		out = append(out, [2]int64{e.Offset / slot, e.End() / slot})
	}
	return out
}

// TestFreeMergesWithEachNeighbour frees block 5 (or an edge block) next to
// each combination of free neighbours: none, the left one, the right one,
// both; and a merging neighbour that is the largest extent (no treap
// check), that is not and keeps its place, and that is not and must move
// past an extent of its old size.
func TestFreeMergesWithEachNeighbour(t *testing.T) {
	cases := []struct {
		name    string
		free    []int // blocks freed before
		target  int
		want    [][2]int64
		largest int64 // blocks
	}{
		{"none", []int{10, 11, 12, 13, 14, 15}, 5, [][2]int64{{5, 6}, {10, 16}}, 6},
		{"none/first block", []int{10, 11}, 0, [][2]int64{{0, 1}, {10, 12}}, 2},
		{"none/last block", []int{2, 3}, 15, [][2]int64{{2, 4}, {15, 16}}, 2},
		{"left/largest", []int{2, 3, 4, 10}, 5, [][2]int64{{2, 6}, {10, 11}}, 4},
		{"left/in place", []int{4, 10, 11, 12, 13, 14, 15}, 5, [][2]int64{{4, 6}, {10, 16}}, 6},
		{"left/moves", []int{4, 8, 12, 13, 14, 15}, 5, [][2]int64{{4, 6}, {8, 9}, {12, 16}}, 4},
		{"left/becomes largest", []int{3, 4, 10, 11}, 5, [][2]int64{{3, 6}, {10, 12}}, 3},
		{"left/last block", []int{14, 2}, 15, [][2]int64{{2, 3}, {14, 16}}, 2},
		{"right/largest", []int{6, 7, 8, 9, 12}, 5, [][2]int64{{5, 10}, {12, 13}}, 5},
		{"right/in place", []int{6, 10, 11, 12, 13, 14, 15}, 5, [][2]int64{{5, 7}, {10, 16}}, 6},
		{"right/moves", []int{6, 8, 12, 13, 14, 15}, 5, [][2]int64{{5, 7}, {8, 9}, {12, 16}}, 4},
		{"right/becomes largest", []int{6, 7, 10, 11}, 5, [][2]int64{{5, 8}, {10, 12}}, 3},
		{"right/first block", []int{1, 9}, 0, [][2]int64{{0, 2}, {9, 10}}, 2},
		{"both", []int{3, 4, 6, 10, 11, 12, 13, 14, 15}, 5, [][2]int64{{3, 7}, {10, 16}}, 6},
		{"both/becomes largest", []int{4, 6, 10, 11}, 5, [][2]int64{{4, 7}, {10, 12}}, 3},
		{"both/whole region", []int{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 5, [][2]int64{{0, 16}}, 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, bs := layout(t, c.free...)
			before := a.Stats()
			require.NoError(t, a.Free(bs[c.target]))
			require.NoError(t, a.Verify())
			assert.Equal(t, c.want, extentsInBlocks(a))
			st := a.Stats()
			assert.Equal(t, c.largest*slot, st.LargestFree)
			assert.Equal(t, before.Free+slot, st.Free)
			assert.Equal(t, before.LiveBlocks-1, st.LiveBlocks)
			assert.Equal(t, before.Frees+1, st.Frees)
			// With no neighbour to merge with, the freed block is the
			// smallest extent and the next best fit.
			if c.name == "none" {
				b, err := a.Allocate(slot)
				require.NoError(t, err)
				assert.Equal(t, bs[c.target].Offset, b.Offset)
				require.NoError(t, a.Verify())
			}
		})
	}
}

// TestFreeSingleRejectsBadHandlesAndChangesNothing: on the single-block
// path, with a free neighbour on each side so that a valid handle would
// take the merge fast path, a stale handle (its block freed and handed out
// again), a handle whose block is already free, one with the wrong size
// and one off the block's start are each ErrInvalidBlock, and nothing
// changes: extents, stats and the new owner's block.
func TestFreeSingleRejectsBadHandlesAndChangesNothing(t *testing.T) {
	for _, side := range []string{"left", "right", "both", "none"} {
		t.Run(side, func(t *testing.T) {
			free := map[string][]int{"left": {4, 12}, "right": {6, 12}, "both": {4, 6, 12}, "none": {12, 13}}[side]
			a, bs := layout(t, free...)
			stale := bs[5]
			require.NoError(t, a.Free(stale))
			cur, err := a.Allocate(slot)
			require.NoError(t, err)
			if cur.Offset != stale.Offset {
				// Best fit chose another extent; take the freed slot back
				// explicitly by allocating until it is live again.
				var extra []allocator.Block
				for cur.Offset != stale.Offset {
					extra = append(extra, cur)
					cur, err = a.Allocate(slot)
					require.NoError(t, err)
				}
				require.NoError(t, a.Free(extra...))
			}
			require.NotEqual(t, stale.Gen, cur.Gen)
			bad := map[string]allocator.Block{
				"stale":      stale,
				"wrong size": {Offset: cur.Offset, Size: 2 * slot, Gen: cur.Gen},
				"off start":  {Offset: cur.Offset + 4*KiB, Size: slot - 4*KiB, Gen: cur.Gen},
				"zero gen":   {Offset: cur.Offset, Size: cur.Size},
			}
			if side != "none" {
				nb := bs[4]
				if side == "right" {
					nb = bs[6]
				}
				bad["already free"] = nb
			}
			for name, b := range bad {
				stats, extents := a.Stats(), a.FreeExtents()
				err := a.Free(b)
				require.ErrorIs(t, err, allocator.ErrInvalidBlock, name)
				after := a.Stats()
				assert.Equal(t, stats, after, "%s: stats changed", name)
				assert.Equal(t, extents, a.FreeExtents(), "%s: extents changed", name)
				require.NoError(t, a.Verify(), name)
			}
			require.NoError(t, a.Free(cur), "the new owner still frees its block")
			require.NoError(t, a.Verify())
		})
	}
}

// TestAllocateCarvesEachWay drives the single Allocate through its three
// ways of taking from the best-fit extent: in place (the rest keeps its
// place in the size treap), a move (the rest falls below its predecessor,
// an extent of the same size at a higher address), and an exact fit that
// removes the extent.
func TestAllocateCarvesEachWay(t *testing.T) {
	cases := []struct {
		name   string
		free   []int
		blocks int64 // object size in blocks
		at     int64 // the block it must start at
		want   [][2]int64
	}{
		{"in place", []int{0, 1, 2, 3, 10}, 2, 0, [][2]int64{{2, 4}, {10, 11}}},
		{"in place/no predecessor", []int{0, 1, 2, 10, 11, 12, 13}, 1, 0, [][2]int64{{1, 3}, {10, 14}}},
		{"moves below predecessor/largest", []int{0, 1, 2, 10}, 2, 0, [][2]int64{{2, 3}, {10, 11}}},
		{"moves below predecessor", []int{0, 1, 2, 10, 12, 13, 14, 15}, 2, 0, [][2]int64{{2, 3}, {10, 11}, {12, 16}}},
		{"exact fit", []int{0, 1, 5, 6, 7}, 2, 0, [][2]int64{{5, 8}}},
		{"exact fit/largest", []int{0, 1, 5}, 2, 0, [][2]int64{{5, 6}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, _ := layout(t, c.free...)
			before := a.Stats()
			b, err := a.Allocate(c.blocks * slot)
			require.NoError(t, err)
			assert.Equal(t, c.at*slot, b.Offset)
			assert.Equal(t, c.blocks*slot, b.Size)
			require.NoError(t, a.Verify())
			assert.Equal(t, c.want, extentsInBlocks(a))
			st := a.Stats()
			assert.Equal(t, before.Free-b.Size, st.Free)
			assert.Equal(t, before.Allocs+1, st.Allocs)
			require.NoError(t, a.Free(b))
			require.NoError(t, a.Verify())
			// Freeing it restores the extents exactly.
			var want [][2]int64
			for _, e := range c.free {
				if n := len(want); n > 0 && want[n-1][1] == int64(e) {
					want[n-1][1]++
				} else {
					want = append(want, [2]int64{int64(e), int64(e) + 1})
				}
			}
			assert.Equal(t, want, extentsInBlocks(a), fmt.Sprint(c.free))
		})
	}
}
