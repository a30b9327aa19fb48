// Heap region contract: the memory is one []byte on the Go heap, so unlike
// the other regions it IS Go memory, scanned (cheaply: it holds no pointers)
// and kept alive by the garbage collector. The allocator never stores Go
// pointers in it. Close drops the slice; the memory is reclaimed by the
// garbage collector once no caller still holds a slice of it.

package hostmem

import (
	"fmt"
	"sync"

	"github.com/kvalloc/kvalloc/allocator"
)

// heapRegion is a Region backed by a plain []byte.
type heapRegion struct {
	mu  sync.Mutex
	buf []byte // nil once closed
	allocator.RegionState
}

// NewHeapRegion returns a region of exactly size bytes on the Go heap,
// zeroed. It needs no privileges and works everywhere, but the memory may be
// paged out and is not pinned for DMA. size <= 0 is an error wrapping
// ErrInvalidArgument, and so is a size the Go runtime cannot allocate as one
// slice (above 2⁴⁸ bytes on 64-bit platforms), which also wraps
// ErrOutOfMemory: it can never be backed.
//
// A size the machine cannot back is an error wrapping ErrOutOfMemory, not a
// crash: Go cannot recover from a failed heap allocation, so on Linux the
// size is checked first against MemAvailable + SwapFree, the cgroup v2
// memory limit and RLIMIT_AS (see heapBackable). Elsewhere no such check is
// possible and a size beyond the machine's memory still ends the process.
// For pools larger than memory, reserve address space with NewMmapRegion
// and MmapOptions.NoReserve instead.
func NewHeapRegion(size int64) (allocator.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: heap region size %d: must be positive", ErrInvalidArgument, size)
	}
	if size > maxHeapSlice {
		return nil, errorf2(ErrInvalidArgument, ErrOutOfMemory, "heap region size %d exceeds the largest Go slice (%s)", size, regionSizeString(maxHeapSlice))
	}
	if err := heapBackable(size); err != nil {
		return nil, err
	}
	buf, err := regionMakeHeap(size)
	if err != nil {
		return nil, err
	}
	return &heapRegion{buf: buf}, nil
}

// regionMakeHeap allocates size bytes, turning the runtime's "len out of
// range" panic into an error. (A size the runtime accepts but the machine
// cannot back is a fatal out-of-memory: Go offers no way to catch it, hence
// heapBackable.)
func regionMakeHeap(size int64) (buf []byte, err error) {
	if uint64(size) > uint64(maxRegionInt) {
		return nil, fmt.Errorf("%w: heap region size %d exceeds the address space", ErrInvalidArgument, size)
	}
	defer func() {
		if r := recover(); r != nil {
			buf = nil
			err = fmt.Errorf("%w: heap region size %d: %v", ErrInvalidArgument, size, r)
		}
	}()
	return make([]byte, int(size)), nil
}

// maxRegionInt is the largest int, as an int64-compatible bound.
const maxRegionInt = int64(^uint(0) >> 1)

// maxHeapSlice bounds a heap region: the Go runtime allocates no object
// larger than its heap's address space, 2⁴⁸ bytes on 64-bit platforms
// (runtime.maxAlloc), nor one longer than an int.
const maxHeapSlice = min(1<<48, maxRegionInt)

// Bytes returns the region, or nil after Close.
func (r *heapRegion) Bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf
}

// Kind returns "heap".
func (r *heapRegion) Kind() string { return KindHeap }

// Close drops the slice. It is idempotent and safe to call concurrently.
func (r *heapRegion) Close() error {
	r.mu.Lock()
	r.buf = nil
	r.MarkClosed()
	r.mu.Unlock()
	return nil
}
