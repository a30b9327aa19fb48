//go:build linux

package bench

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// newNoReserveRegion maps size bytes with hostmem.MmapOptions{NoReserve:
// true}: address space without committed memory, so a production-size pool
// (45 GiB and more) costs no RAM as long as nothing writes it, and the
// allocator and the manager never do.
func newNoReserveRegion(size int64) (allocator.Region, error) {
	return hostmem.NewMmapRegion(size, hostmem.MmapOptions{NoReserve: true})
}
