//go:build !linux

package hostmem

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSegmentedRegionUnsupported: off Linux the constructor says so, and
// nothing else pretends to work.
func TestSegmentedRegionUnsupported(t *testing.T) {
	r, err := NewSegmentedRegion(64<<20, SegmentedOptions{})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Nil(t, r)
	assert.Contains(t, err.Error(), "it needs Linux")
	_, err = NewCUDARegistrar()
	require.ErrorIs(t, err, ErrCUDAUnavailable)
}
