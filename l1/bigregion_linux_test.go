//go:build linux

package l1_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// newBigAlloc returns an allocator over a NoReserve mmap region of capacity
// bytes, 4 KiB aligned, closed with the test. MAP_NORESERVE reserves
// address space without memory or swap, so tests can build pools of
// production size (tens of GiB) on a small machine. The allocator never
// touches region memory, and these tests write at most stamps at the ends
// of blocks, so a pool backs a few pages per stamped block at most.
func newBigAlloc(t testing.TB, capacity int64) *allocator.Allocator {
	t.Helper()
	r, err := hostmem.NewMmapRegion(capacity, hostmem.MmapOptions{NoReserve: true})
	require.NoError(t, err, "mmap %d bytes with MAP_NORESERVE", capacity)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}
