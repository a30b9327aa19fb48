//go:build linux

package trace

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
)

// noReserveRegion is an allocator.Region over an anonymous private mapping
// made with MAP_NORESERVE: it reserves address space and no memory, which
// is all the replay needs, since the allocator never touches region memory
// and the replay writes none. A pool of tens of GiB costs nothing until
// touched. (allocator.NewMmapRegion with a NoReserve option would replace
// it.)
type noReserveRegion struct {
	mu  sync.Mutex
	mem []byte // nil once closed
}

// newPoolRegion returns a region of size bytes that reserves no memory.
func newPoolRegion(size int64) (allocator.Region, error) {
	if size <= 0 || uint64(size) > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("%w: pool of %d bytes", ErrOptions, size)
	}
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("trace: mmap a pool of %d bytes with MAP_NORESERVE: %w", size, err)
	}
	return &noReserveRegion{mem: mem}, nil
}

// Bytes returns the mapping, or nil after Close.
func (r *noReserveRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem
}

// Kind returns "mmap".
func (r *noReserveRegion) Kind() string { return allocator.KindMmap }

// Close unmaps the region; it is idempotent.
func (r *noReserveRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	if err != nil {
		return fmt.Errorf("trace: munmap the pool: %w", err)
	}
	return nil
}
