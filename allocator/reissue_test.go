package allocator_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

func TestReissueHandsTheBlockToANewOwner(t *testing.T) {
	a := newAlloc(t, 8*slot, 0)
	bs, err := a.AllocateBatch(slot, 4, allocator.Scattered)
	require.NoError(t, err)
	before := a.Stats()
	nb, err := a.Reissue(bs[1], bs[3])
	require.NoError(t, err)
	require.Len(t, nb, 2)
	for i, old := range []allocator.Block{bs[1], bs[3]} {
		assert.Equal(t, old.Offset, nb[i].Offset)
		assert.Equal(t, old.Size, nb[i].Size)
		assert.Greater(t, nb[i].Gen, bs[3].Gen, "a new generation, above every earlier one")
	}
	assert.NotEqual(t, nb[0].Gen, nb[1].Gen)
	after := a.Stats()
	assert.Equal(t, before.Used, after.Used)
	assert.Equal(t, before.LiveBlocks, after.LiveBlocks)
	assert.Equal(t, before.FreeExtents, after.FreeExtents)
	assert.Equal(t, before.Allocs+2, after.Allocs)
	assert.Equal(t, before.Frees+2, after.Frees)
	require.NoError(t, a.Verify())

	// The old handles are stale: they free nothing, and reissue nothing.
	err = a.Free(bs[1])
	require.ErrorIs(t, err, allocator.ErrInvalidBlock)
	assert.ErrorContains(t, err, "stale handle")
	_, err = a.Reissue(bs[3])
	require.ErrorIs(t, err, allocator.ErrInvalidBlock)
	// The new ones free the blocks.
	require.NoError(t, a.Free(nb...))
	require.NoError(t, a.Free(bs[0], bs[2]))
	assert.Zero(t, a.Stats().Used)
	require.NoError(t, a.Verify())
}

func TestReissueIsAllOrNothing(t *testing.T) {
	a := newAlloc(t, 8*slot, 0)
	bs, err := a.AllocateBatch(slot, 4, allocator.Scattered)
	require.NoError(t, err)
	foreign := allocator.Block{Offset: 6 * slot, Size: slot, Gen: 1}
	for name, call := range map[string]struct {
		blocks []allocator.Block
		reason string
	}{
		"repeated":  {[]allocator.Block{bs[0], bs[1], bs[0]}, "repeated in this call"},
		"free":      {[]allocator.Block{bs[0], foreign}, "no live block starts here"},
		"wrongsize": {[]allocator.Block{bs[2], {Offset: bs[3].Offset, Size: 2 * slot, Gen: bs[3].Gen}}, "size does not match"},
		"stale":     {[]allocator.Block{bs[1], {Offset: bs[3].Offset, Size: slot, Gen: bs[3].Gen + 100}}, "stale handle"},
		"range":     {[]allocator.Block{bs[0], {Offset: 9 * slot, Size: slot}}, "out of range"},
		"misalign":  {[]allocator.Block{{Offset: 1, Size: slot}}, "not aligned"},
	} {
		t.Run(name, func(t *testing.T) {
			dst := make([]allocator.Block, 1, 8)
			got, err := a.AppendReissue(dst, call.blocks)
			require.ErrorIs(t, err, allocator.ErrInvalidBlock)
			assert.ErrorContains(t, err, call.reason)
			assert.Equal(t, dst, got, "dst unchanged")
			require.NoError(t, a.Verify())
		})
	}
	// Nothing changed: the original handles are all still valid.
	require.NoError(t, a.Free(bs...))
	require.NoError(t, a.Verify())

	got, err := a.Reissue()
	require.NoError(t, err)
	assert.NotNil(t, got)
	assert.Empty(t, got)
}

func TestReissueAfterClose(t *testing.T) {
	r, err := hostmem.NewHeapRegion(4 * slot)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	b, err := a.Allocate(slot)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	_, err = a.Reissue(b)
	require.ErrorIs(t, err, allocator.ErrClosed)
}
