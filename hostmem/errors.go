package hostmem

import (
	"fmt"
	"strings"

	"github.com/kvalloc/kvalloc/allocator"
)

// Sentinel errors. Every error the package returns wraps one of these, so
// callers test with errors.Is and never match strings. Every message
// carries the package prefix once: "hostmem: out of memory: mmap 64 GiB:
// ...". The four that the allocator also has match the allocator's too:
// errors.Is(err, allocator.ErrOutOfMemory) holds for a region the machine
// cannot back, so one test covers a pool that does not fit at creation and
// an allocation that does not fit later.
var (
	// ErrOutOfMemory means the machine cannot back a region of the size
	// asked now, or a memory limit (RLIMIT_MEMLOCK, the cgroup, the
	// overcommit policy) refused it; the message names the limit. It
	// matches allocator.ErrOutOfMemory.
	ErrOutOfMemory error = &sentinel{"hostmem: out of memory", allocator.ErrOutOfMemory}

	// ErrInvalidArgument means a size or an option was rejected before
	// anything was mapped. It matches allocator.ErrInvalidArgument.
	ErrInvalidArgument error = &sentinel{"hostmem: invalid argument", allocator.ErrInvalidArgument}

	// ErrClosed means the region was closed before what was asked of it
	// happened (SegmentedRegion.Wait). It matches allocator.ErrClosed.
	ErrClosed error = &sentinel{"hostmem: closed", allocator.ErrClosed}

	// ErrRelease means a region's Close could not give its memory back to
	// the system (munmap, munlock, an unregistration or cudaFreeHost
	// failed). The error wraps the system's error too. The region counts as
	// closed all the same. It matches allocator.ErrRelease.
	ErrRelease error = &sentinel{"hostmem: releasing region memory failed", allocator.ErrRelease}

	// ErrCUDAUnavailable means the CUDA runtime, driver or device needed by
	// NewCUDAHostRegion or NewCUDARegistrar is missing; the message says
	// which.
	ErrCUDAUnavailable error = &sentinel{msg: "hostmem: CUDA unavailable"}

	// ErrUnsupported means the region kind does not exist on this platform:
	// mmap, pinned, segmented and CUDA host regions are Linux only. The
	// heap region works everywhere.
	ErrUnsupported error = &sentinel{msg: "hostmem: unsupported on this platform"}
)

// sentinel is one of the package's sentinel errors; it unwraps to the
// allocator's sentinel of the same meaning, when there is one.
type sentinel struct {
	msg  string
	base error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.base }

// multiError is an error that wraps several sentinels under one message,
// so the message carries the package prefix once although errors.Is
// matches every sentinel.
type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }

// errorf2 returns "hostmem: <first> (<second>): <details>" wrapping both
// sentinels.
func errorf2(first, second error, format string, args ...any) error {
	msg := fmt.Sprintf("%s (%s): %s", first, strings.TrimPrefix(second.Error(), "hostmem: "), fmt.Sprintf(format, args...))
	return &multiError{msg: msg, errs: []error{first, second}}
}
