package hostmem

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Region tests that run on every platform; the mmap, pinned and CUDA ones
// are in region_test.go (Linux only).

const (
	regionKiB = int64(1) << 10
	regionMiB = int64(1) << 20
)

// exerciseRegion checks the size and kind of r, writes and reads back the
// first and last byte of every page, closes it twice and checks Bytes is nil
// afterwards.
func exerciseRegion(t *testing.T, r allocator.Region, size int64, kind string) {
	t.Helper()
	require.NotNil(t, r)
	assert.Equal(t, kind, r.Kind())
	b := r.Bytes()
	require.Len(t, b, int(size))
	require.Equal(t, len(b), cap(b), "Bytes must not expose memory past size")

	page := os.Getpagesize()
	for off := 0; off < len(b); off += page {
		require.Zerof(t, b[off], "fresh region not zeroed at %d", off)
		b[off] = byte(off/page) | 1
	}
	b[len(b)-1] = 0xA5
	for off := 0; off < len(b); off += page {
		if off == len(b)-1 {
			continue
		}
		require.Equalf(t, byte(off/page)|1, b[off], "read back at offset %d", off)
	}
	require.Equal(t, byte(0xA5), b[len(b)-1])

	require.NoError(t, r.Close())
	require.NoError(t, r.Close(), "second Close must return nil")
	assert.Nil(t, r.Bytes(), "Bytes after Close")
	assert.Equal(t, kind, r.Kind(), "Kind after Close")
}

func TestRegionHeap(t *testing.T) {
	for _, size := range []int64{1, 4095, regionMiB, 3*regionMiB + 123} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			r, err := NewHeapRegion(size)
			require.NoError(t, err)
			exerciseRegion(t, r, size, KindHeap)
		})
	}
}

func TestRegionSizeString(t *testing.T) {
	for n, want := range map[int64]string{
		1:                     "1 bytes",
		1023:                  "1023 bytes",
		1024:                  "1 KiB",
		64 * regionMiB:        "64 MiB",
		3 << 30:               "3 GiB",
		1 << 50:               "1024 TiB",
		regionMiB + regionKiB: "1049600 bytes (1.0 MiB)",
	} {
		assert.Equal(t, want, regionSizeString(n), "%d", n)
	}
}

// TestRegionCUDAHost runs against whatever this machine has: without CUDA it
// checks the error, with CUDA it allocates 64 MiB.

// TestHeapRegionBeyondTheRuntimeIsInvalid: a size no Go slice can have
// (1<<62, MaxInt64) wraps ErrInvalidArgument, as NewHeapRegion's doc says,
// and ErrOutOfMemory, since it can never be backed; before, on Linux, the
// memory check ran first and the error wrapped ErrOutOfMemory alone.
func TestHeapRegionBeyondTheRuntimeIsInvalid(t *testing.T) {
	for _, size := range []int64{1 << 62, math.MaxInt64} {
		r, err := NewHeapRegion(size)
		require.ErrorIs(t, err, ErrInvalidArgument, "size %d", size)
		require.ErrorIs(t, err, ErrOutOfMemory, "size %d", size)
		assert.Nil(t, r)
		assert.Equal(t, 1, strings.Count(err.Error(), "hostmem:"), err.Error())
	}
}
