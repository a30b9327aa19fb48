//go:build linux

package bench

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
)

// noReserveRegion is an anonymous MAP_NORESERVE mapping: address space
// without committed memory, so a production-size pool (45 GiB and more)
// costs no RAM as long as nothing writes it, and the allocator and the
// manager never do. It stands in for allocator.MmapOptions{NoReserve: true}
// until that option reaches this branch.
type noReserveRegion struct {
	mu  sync.Mutex
	mem []byte
}

func newNoReserveRegion(size int64) (allocator.Region, error) {
	mem, err := unix.Mmap(-1, 0, int(size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("bench: mmap %d bytes with MAP_NORESERVE: %w", size, err)
	}
	return &noReserveRegion{mem: mem}, nil
}

func (r *noReserveRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mem
}

func (r *noReserveRegion) Kind() string { return allocator.KindMmap }

func (r *noReserveRegion) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}
