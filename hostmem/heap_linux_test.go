//go:build linux

package hostmem

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHeapRegionThatCannotBeBackedIsAnError: a heap region larger than the
// machine's memory is an error wrapping ErrOutOfMemory (a review finding:
// before the fix make ran and the process died with "fatal error: runtime:
// out of memory").
func TestHeapRegionThatCannotBeBackedIsAnError(t *testing.T) {
	avail, ok := meminfoAvailable()
	if !ok {
		t.Skip("/proc/meminfo unreadable")
	}
	for _, size := range []int64{1 << 46, int64(avail) + 1<<30} {
		r, err := NewHeapRegion(size)
		require.ErrorIs(t, err, ErrOutOfMemory, "size %d", size)
		assert.Nil(t, r)
		assert.Contains(t, err.Error(), "cannot be backed")
	}
	r, err := NewHeapRegion(1 << 20)
	require.NoError(t, err)
	require.NoError(t, r.Close())
}
