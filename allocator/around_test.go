package allocator_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

func TestFreeAround(t *testing.T) {
	r, err := hostmem.NewHeapRegion(16 * 4096)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: 4096})
	require.NoError(t, err)
	bs, err := a.AllocateBatch(4096, 16, allocator.ContiguousFirst)
	require.NoError(t, err)
	require.NoError(t, a.Free(bs[0], bs[2], bs[3], bs[7], bs[8], bs[9], bs[15]))
	// Free: [0], [2,4), [7,10), [15]. Live: 1, 4-6, 10-14.
	for _, c := range []struct {
		i             int
		before, after int64
	}{
		{1, 4096, 2 * 4096}, // between [0] and [2,4)
		{4, 2 * 4096, 0},    // after [2,4)
		{6, 0, 3 * 4096},    // before [7,10)
		{10, 3 * 4096, 0},   // after [7,10)
		{12, 0, 0},          // live on both sides
		{14, 0, 4096},       // before [15]
	} {
		before, after := a.FreeAround(bs[c.i])
		assert.Equal(t, c.before, before, "block %d before", c.i)
		assert.Equal(t, c.after, after, "block %d after", c.i)
	}
	// What it predicts is what Free does: freeing 1 merges [0,4).
	require.NoError(t, a.Free(bs[1]))
	assert.Equal(t, int64(4*4096), a.FreeExtents()[0].Size)
	require.NoError(t, a.Close())
	before, after := a.FreeAround(bs[4])
	assert.Zero(t, before+after, "closed")
}
