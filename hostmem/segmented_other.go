//go:build !linux

package hostmem

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// segOS off Linux: NewSegmentedRegion fails in segSupported before any of
// these is called.
type segOS struct{}

func segSupported() error {
	return fmt.Errorf("%w: segmented region: %w on %s (it needs Linux: mmap MAP_NORESERVE, MADV_POPULATE_WRITE, mlock, mbind)",
		ErrInvalidArgument, errors.ErrUnsupported, runtime.GOOS)
}

func segPageSize() uintptr        { return uintptr(os.Getpagesize()) }
func segHugePageSize() uintptr    { return 2 << 20 }
func segHugeTLBPageSize() uintptr { return 2 << 20 }

func (s *segOS) reserve(int64, uintptr, SegmentedOptions) (error, error) { return nil, segSupported() }
func (s *segOS) segment(int64, int64) []byte                             { return nil }
func (s *segOS) populate([]byte) error                                   { return segSupported() }
func (s *segOS) lock([]byte) error                                       { return segSupported() }
func (s *segOS) unlock([]byte) error                                     { return segSupported() }
func (s *segOS) release([]byte)                                          {}
func (s *segOS) unmap() error                                            { return nil }
func (s *segOS) file() int                                               { return -1 }

func segMemlockLimitText() string { return "" }
func segMemoryLimitText() string  { return "" }

// NewCUDARegistrar fails off Linux: the segmented region it serves is
// Linux-only.
func NewCUDARegistrar() (HostRegistrar, error) {
	return nil, fmt.Errorf("%w: CUDA host registration is supported on Linux only (%s)", ErrCUDAUnavailable, runtime.GOOS)
}
