//go:build linux

package trace

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// newPoolRegion returns a region of size bytes that reserves no memory: a
// NoReserve mmap region, address space and no memory, which is all the
// replay needs, since the allocator never touches region memory and the
// replay writes none. A pool of tens of GiB costs nothing until touched.
func newPoolRegion(size int64) (allocator.Region, error) {
	if size <= 0 || uint64(size) > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("%w: pool of %d bytes", ErrOptions, size)
	}
	r, err := hostmem.NewMmapRegion(size, hostmem.MmapOptions{NoReserve: true})
	if err != nil {
		return nil, fmt.Errorf("trace: a pool of %d bytes: %w", size, err)
	}
	return r, nil
}
