//go:build !linux

package trace

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// newPoolRegion returns a heap region of size bytes: without MAP_NORESERVE
// the pool is real memory, so use a small block size (-block-size) there.
func newPoolRegion(size int64) (allocator.Region, error) {
	return hostmem.NewHeapRegion(size)
}
