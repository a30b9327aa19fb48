//go:build linux

package server

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// TestIndexRoundTrip: an index decodes to what was encoded, and restores
// into an allocator and manager holding those objects.
func TestIndexRoundTrip(t *testing.T) {
	id := poolIdentity{bytes: 1 << 20, align: 4096, dev: 7, ino: 99}
	objs := testObjects(20)
	b := encodeIndex(nil, id, l1.EvictS3FIFO, 0xabc, objs, nil, nil)
	x, err := decodeIndex(b, id)
	require.NoError(t, err)
	require.Equal(t, objs, x.objects)
	require.Equal(t, uint64(0xabc), x.epoch)
	r, err := hostmem.NewHeapRegion(1 << 20)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer a.Close()
	m, err := restoreIndex(a, l1.Config{Eviction: l1.EvictS3FIFO}, x, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 20, m.Len())
	st, ok := m.State(objs[5].Key)
	require.True(t, ok)
	require.Equal(t, objs[5].Block, st.Block)
}

// TestIndexRefuses: every truncation, every flipped bit, another pool
// and an inconsistent list are refused, each with errIndex.
func TestIndexRefuses(t *testing.T) {
	id := poolIdentity{bytes: 1 << 20, align: 4096, dev: 7, ino: 99}
	b := encodeIndex(nil, id, l1.EvictLRU, 1, testObjects(3), nil, nil)
	for n := range len(b) {
		_, err := decodeIndex(b[:n], id)
		require.ErrorIs(t, err, errIndex, "torn at %d", n)
	}
	for i := range len(b) * 8 {
		c := append([]byte(nil), b...)
		c[i/8] ^= 1 << (i % 8)
		_, err := decodeIndex(c, id)
		require.ErrorIs(t, err, errIndex, "bit %d flipped", i)
	}
	for name, other := range map[string]poolIdentity{
		"size":  {bytes: 2 << 20, align: 4096, dev: 7, ino: 99},
		"align": {bytes: 1 << 20, align: 8192, dev: 7, ino: 99},
		"memfd": {bytes: 1 << 20, align: 4096, dev: 7, ino: 100},
	} {
		_, err := decodeIndex(b, other)
		require.ErrorIs(t, err, errIndex, name)
	}
	// Well formed, but the blocks overlap: the restore refuses it.
	objs := testObjects(3)
	objs[1].Block.Offset = 4096
	x, err := decodeIndex(encodeIndex(nil, id, l1.EvictLRU, 1, objs, nil, nil), id)
	require.NoError(t, err)
	r, err := hostmem.NewHeapRegion(1 << 20)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer a.Close()
	_, err = restoreIndex(a, l1.Config{}, x, time.Hour)
	require.True(t, errors.Is(err, errIndex) && errors.Is(err, allocator.ErrInvalidBlock), "%v", err)
	require.Equal(t, int64(0), a.Stats().Used, "a refused restore changed the allocator")
}
