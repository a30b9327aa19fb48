package allocator_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
)

// TestRestore: an allocator that churned is restored into a fresh one from
// its live blocks alone: the same free extents and stats, the old handles
// free, and new blocks get generations above the restored ones.
func TestRestore(t *testing.T) {
	old := newAlloc(t, 4*MiB, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	var live []allocator.Block
	for range 400 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			require.NoError(t, old.Free(live[i]))
			live = append(live[:i], live[i+1:]...)
			continue
		}
		bs, err := old.AllocateUpTo(int64(1+rng.IntN(5))*4096, 1+rng.IntN(4), allocator.Scattered)
		require.NoError(t, err)
		live = append(live, bs...)
	}
	fresh := newAlloc(t, 4*MiB, 4096)
	require.NoError(t, fresh.Restore(live))
	require.NoError(t, fresh.Verify())
	want, got := old.Stats(), fresh.Stats()
	require.Equal(t, want.Used, got.Used)
	require.Equal(t, want.Free, got.Free)
	require.Equal(t, want.LargestFree, got.LargestFree)
	require.Equal(t, want.LiveBlocks, got.LiveBlocks)
	require.Equal(t, old.FreeExtents(), fresh.FreeExtents())
	var maxGen uint64
	for _, b := range live {
		maxGen = max(maxGen, b.Gen)
	}
	if fresh.Stats().Free > 0 {
		b, err := fresh.Allocate(4096)
		require.NoError(t, err)
		require.Greater(t, b.Gen, maxGen, "a new block reuses a restored generation")
		require.NoError(t, fresh.Free(b))
	}
	require.NoError(t, fresh.Free(live...), "the old handles are the restored blocks")
	require.Equal(t, int64(0), fresh.Stats().Used)
	require.NoError(t, fresh.Verify())
}

// TestRestoreRefuses: bad blocks, and an allocator that is not fresh, are
// refused with the sentinel, and nothing changes.
func TestRestoreRefuses(t *testing.T) {
	b := func(off, size int64, gen uint64) allocator.Block {
		return allocator.Block{Offset: off, Size: size, Gen: gen}
	}
	for name, bs := range map[string][]allocator.Block{
		"overlap":    {b(0, 8192, 1), b(4096, 4096, 2)},
		"unaligned":  {b(100, 4096, 1)},
		"odd size":   {b(0, 4000, 1)},
		"empty":      {b(0, 0, 1)},
		"past end":   {b(MiB-4096, 8192, 1)},
		"negative":   {b(-4096, 4096, 1)},
		"generation": {b(0, 4096, 0)},
	} {
		a := newAlloc(t, MiB, 4096)
		err := a.Restore(bs)
		require.ErrorIs(t, err, allocator.ErrInvalidBlock, name)
		st := a.Stats()
		require.Equal(t, int64(0), st.Used, name)
		require.Equal(t, 1, st.FreeExtents, name)
		require.NoError(t, a.Verify(), name)
	}
	a := newAlloc(t, MiB, 4096)
	x, err := a.Allocate(4096)
	require.NoError(t, err)
	err = a.Restore([]allocator.Block{b(8192, 4096, 1)})
	require.True(t, errors.Is(err, allocator.ErrInvalidArgument), "%v", err)
	require.NoError(t, a.Free(x))
}
