//go:build !linux

package hostmem

import (
	"fmt"
	"runtime"

	"github.com/kvalloc/kvalloc/allocator"
)

// NewMmapRegion needs Linux (mmap, madvise, mlock through x/sys/unix). On
// this platform it returns an error wrapping ErrUnsupported; size <= 0 is
// still ErrInvalidArgument. Use NewHeapRegion, which works everywhere.
func NewMmapRegion(size int64, opts MmapOptions) (allocator.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: mmap region size %d: must be positive", ErrInvalidArgument, size)
	}
	return nil, fmt.Errorf("%w: mmap regions need Linux, this is %s/%s; use NewHeapRegion", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
}

// NewCUDAHostRegion needs Linux. On this platform it returns an error
// wrapping both ErrCUDAUnavailable and ErrUnsupported; size <= 0 is still
// ErrInvalidArgument.
func NewCUDAHostRegion(size int64) (allocator.Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("%w: cuda-host region size %d: must be positive", ErrInvalidArgument, size)
	}
	return nil, errorf2(ErrCUDAUnavailable, ErrUnsupported, "CUDA host regions need Linux, this is %s/%s", runtime.GOOS, runtime.GOARCH)
}
