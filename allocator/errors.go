package allocator

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error the package returns wraps one of these, so
// callers test with errors.Is and never match strings. Every message
// carries the package prefix once: "allocator: out of memory: need ...".
var (
	// ErrOutOfMemory means the request is valid but the free extents cannot
	// hold it now. A size larger than the whole capacity wraps both this and
	// ErrInvalidArgument: it can never fit, and a caller that maps "does not
	// fit" to a per-key status may treat it as out of memory.
	ErrOutOfMemory = errors.New("allocator: out of memory")

	// ErrInvalidArgument means a size, count, alignment or region was
	// rejected before anything changed. A region already owned by another
	// allocator is an invalid argument to New.
	ErrInvalidArgument = errors.New("allocator: invalid argument")

	// ErrInvalidBlock means Free was given a block that is not, exactly, a
	// live block of this allocator: foreign, misaligned, out of range,
	// wrongly sized, already free, stale (an older generation) or repeated
	// within the call.
	ErrInvalidBlock = errors.New("allocator: invalid block")

	// ErrClosed means the allocator or its region was already closed. A
	// region closed directly, behind its allocator's back, makes every
	// later call of that allocator fail with it.
	ErrClosed = errors.New("allocator: closed")

	// ErrRelease means a region's Close could not give its memory back to
	// the system (munmap, munlock or cudaFreeHost failed): the Region
	// contract has Close wrap it. The error wraps the system's error too.
	// The region counts as closed all the same.
	ErrRelease = errors.New("allocator: releasing region memory failed")
)

// multiError is an error that wraps several sentinels under one message,
// so the message carries the package prefix once although errors.Is
// matches every sentinel.
type multiError struct {
	msg  string
	errs []error
}

func (e *multiError) Error() string   { return e.msg }
func (e *multiError) Unwrap() []error { return e.errs }

// errorf2 returns "allocator: <first> (<second>): <details>" wrapping both
// sentinels.
func errorf2(first, second error, format string, args ...any) error {
	msg := fmt.Sprintf("%s (%s): %s", first, trimPrefix(second), fmt.Sprintf(format, args...))
	return &multiError{msg: msg, errs: []error{first, second}}
}

// trimPrefix returns a sentinel's text without the package prefix.
func trimPrefix(err error) string {
	const p = "allocator: "
	s := err.Error()
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// noSpaceError is the error of an allocation that does not fit now: k
// objects of size bytes, with free bytes free; when fragmented, free was
// enough but no extent, or set of them, could hold the objects, and largest
// and extents describe the free space. It wraps ErrOutOfMemory, and its
// message, built when read, is
//
//	allocator: out of memory: need N bytes (k × size), only F free
//	allocator: out of memory: need N bytes (k × size); F free but fragmented (largest extent L bytes, E extents)
type noSpaceError struct {
	k, size, free, largest int64
	extents                int
	fragmented             bool
}

func (e *noSpaceError) Error() string {
	need := e.k * e.size
	if !e.fragmented {
		return fmt.Sprintf("%s: need %d bytes (%d × %d), only %d free", ErrOutOfMemory, need, e.k, e.size, e.free)
	}
	return fmt.Sprintf("%s: need %d bytes (%d × %d); %d free but fragmented (largest extent %d bytes, %d extents)",
		ErrOutOfMemory, need, e.k, e.size, e.free, e.largest, e.extents)
}

func (e *noSpaceError) Unwrap() error { return ErrOutOfMemory }
