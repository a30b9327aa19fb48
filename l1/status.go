package l1

import (
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
)

// Status is the outcome of one key in a batch call. Every batch method
// returns one status per key, in the order of the keys it was given.
type Status uint8

const (
	// OK means the operation was applied to the key.
	OK Status = iota
	// KeyNotExist means the manager holds no object for the key.
	KeyNotExist
	// KeyNotReadable means the object is write-locked (ReserveRead), or is
	// not read-locked (UnsafeRead).
	KeyNotReadable
	// KeyNotWritable means ReserveWrite may not reserve the key: it exists
	// in mode ModeNew, is missing in mode ModeUpdate, is locked or
	// temporary, its block is smaller than the new size, or the key
	// repeats an earlier key of the same call.
	KeyNotWritable
	// KeyInWrongState means the object is not in the state the finishing
	// call expects: FinishRead on an object that is not read-locked or is
	// write-locked; FinishWrite, AbortWrite or FinishWriteAndReserveRead on
	// an object that is not write-locked (or, for the last, is read-locked).
	KeyInWrongState
	// KeyIsLocked means Delete without force met a read- or write-locked
	// object.
	KeyIsLocked
	// OutOfMemory means ReserveWrite could not allocate the key: it lies in
	// the tail after the largest prefix that fit.
	OutOfMemory
)

var statusNames = [...]string{
	OK:              "OK",
	KeyNotExist:     "KEY_NOT_EXIST",
	KeyNotReadable:  "KEY_NOT_READABLE",
	KeyNotWritable:  "KEY_NOT_WRITABLE",
	KeyInWrongState: "KEY_IN_WRONG_STATE",
	KeyIsLocked:     "KEY_IS_LOCKED",
	OutOfMemory:     "OUT_OF_MEMORY",
}

// String returns LMCache's name for the status, e.g. "KEY_NOT_EXIST"; OK
// is LMCache's SUCCESS.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// ParseStatus is the inverse of Status.String.
func ParseStatus(s string) (Status, error) {
	for i, name := range statusNames {
		if name == s {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown status %q", ErrInvalidArgument, s)
}

// Result is the outcome of one key of a call that hands out memory. Block is
// the object's block when Status is OK and the zero Block otherwise.
type Result struct {
	Status Status
	Block  allocator.Block
}

// Errors. Per-key outcomes are Statuses; an error means the whole call was
// refused or failed, and the manager is as it was before the call, except
// for expired objects it reclaimed and objects it evicted on the way.
var (
	// ErrInvalidArgument wraps every rejection of a call's arguments or of
	// a Config. Nothing has changed when it is returned.
	ErrInvalidArgument = errors.New("l1: invalid argument")
	// ErrClosed is returned by calls that need memory after Close.
	ErrClosed = errors.New("l1: manager closed")
)
