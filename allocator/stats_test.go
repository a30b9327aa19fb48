package allocator_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
)

func TestFragmentationFormula(t *testing.T) {
	for _, tc := range []struct {
		free, largest int64
		want          float64
	}{
		{0, 0, 0},
		{4096, 4096, 0},
		{4 * MiB, MiB, 0.75},
		{1 << 40, 4096, 1 - 4096.0/(1<<40)},
	} {
		assert.Equal(t, tc.want, allocator.Stats{Free: tc.free, LargestFree: tc.largest}.Fragmentation(), "%+v", tc)
	}
}

// TestFragmentationOfAPool frees every other block of a full pool: the
// free bytes are half the pool in one-block extents, so all but one
// block's worth of them is out of reach of a two-block object.
func TestFragmentationOfAPool(t *testing.T) {
	a := newAlloc(t, 16*4096, 4096)
	assert.Zero(t, a.Stats().Fragmentation(), "an empty pool is one extent")
	bs, err := a.AllocateBatch(4096, 16, allocator.Contiguous)
	require.NoError(t, err)
	assert.Zero(t, a.Stats().Fragmentation(), "a full pool has nothing free")
	for i := 0; i < 16; i += 2 {
		require.NoError(t, a.Free(bs[i]))
	}
	st := a.Stats()
	require.Equal(t, 8*int64(4096), st.Free)
	assert.Equal(t, 1-1.0/8, st.Fragmentation())
}
