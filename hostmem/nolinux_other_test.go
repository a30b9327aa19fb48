//go:build !linux

package hostmem

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRegionUnsupportedElsewhere: off Linux the mmap and CUDA constructors
// return a clear error wrapping ErrUnsupported, and an allocator over a
// heap region works.
func TestRegionUnsupportedElsewhere(t *testing.T) {
	r, err := NewMmapRegion(1<<20, MmapOptions{})
	require.ErrorIs(t, err, ErrUnsupported)
	assert.Nil(t, r)
	r, err = NewCUDAHostRegion(1 << 20)
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorIs(t, err, ErrCUDAUnavailable)
	assert.Nil(t, r)
	_, err = NewMmapRegion(0, MmapOptions{})
	require.ErrorIs(t, err, ErrInvalidArgument)
}
