package allocator

import "errors"

// Sentinel errors. Every error the package returns wraps one of these, so
// callers test with errors.Is and never match strings.
var (
	// ErrOutOfMemory means the request is valid but the free extents cannot
	// hold it now. A size larger than the whole capacity wraps both this and
	// ErrInvalidArgument: it can never fit, and a caller that maps "does not
	// fit" to a per-key status may treat it as out of memory.
	ErrOutOfMemory = errors.New("allocator: out of memory")

	// ErrInvalidArgument means a size, count, alignment or region was
	// rejected before anything changed.
	ErrInvalidArgument = errors.New("allocator: invalid argument")

	// ErrInvalidBlock means Free was given a block that is not, exactly, a
	// live block of this allocator: foreign, misaligned, out of range,
	// wrongly sized, already free or repeated within the call.
	ErrInvalidBlock = errors.New("allocator: invalid block")

	// ErrClosed means the allocator or region was already closed.
	ErrClosed = errors.New("allocator: closed")

	// ErrCUDAUnavailable means the CUDA runtime, driver or device needed by
	// NewCUDAHostRegion is missing; the message says which.
	ErrCUDAUnavailable = errors.New("allocator: CUDA unavailable")
)
