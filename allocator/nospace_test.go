package allocator

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// The error of a batch that does not fit is built lazily (noSpaceError),
// but it reads exactly as before: it wraps ErrOutOfMemory, not
// ErrInvalidArgument, says the sizes, and tells exhaustion from
// fragmentation.
func TestOutOfMemoryErrorSaysSizes(t *testing.T) {
	r, err := newSliceRegion(4 * 4096)
	require.NoError(t, err)
	a, err := New(r, Options{})
	require.NoError(t, err)
	defer a.Close()
	bs, err := a.AllocateBatch(4096, 4, Scattered)
	require.NoError(t, err)
	require.NoError(t, a.Free(bs[0], bs[2]))

	_, err = a.AllocateBatch(4096, 3, Scattered)
	require.ErrorIs(t, err, ErrOutOfMemory)
	require.False(t, errors.Is(err, ErrInvalidArgument))
	require.EqualError(t, err, "allocator: out of memory: need 12288 bytes (3 × 4096), only 8192 free")

	_, err = a.AllocateBatch(4000, 2, Contiguous)
	require.ErrorIs(t, err, ErrOutOfMemory)
	require.EqualError(t, err, "allocator: out of memory: need 8192 bytes (2 × 4096); 8192 free but fragmented (largest extent 4096 bytes, 2 extents)")

	_, err = a.Allocate(8192)
	require.ErrorIs(t, err, ErrOutOfMemory)
	require.EqualError(t, err, "allocator: out of memory: need 8192 bytes (1 × 8192); 8192 free but fragmented (largest extent 4096 bytes, 2 extents)")

	st := a.Stats()
	require.Equal(t, uint64(1), st.FailedNoSpace)
	require.Equal(t, uint64(2), st.FailedFragmented)
	require.NoError(t, a.Verify())
}
