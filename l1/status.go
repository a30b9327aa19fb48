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
	// StaleLease means the lease a finishing call presented is not the one
	// of the lock's current holder: the caller's lock lapsed (or was
	// released, or its object deleted) and the key has been locked again
	// since, by someone else. Nothing is committed, aborted, unlocked or
	// freed. See Lease.
	StaleLease
	// Skipped means the call stopped before the key and did nothing to it:
	// ReserveReadPrefix answers it for every key after the first that was
	// not readable.
	Skipped
	// WriteLapsed means the caller's write lock lapsed before its
	// FinishWrite or FinishWriteAndReserveRead, under
	// Config.QuarantineLapsedWrites: the write was dropped, never made
	// readable, and the block the caller was writing, quarantined since
	// the lapse, is freed now. The caller may reserve the key again.
	WriteLapsed
	// WriteDeleted means the caller's key was deleted with force (Delete
	// or Clear) while its write was reserved, before its FinishWrite or
	// FinishWriteAndReserveRead: the write was dropped, never made
	// readable, and its block, held from every other writer since the
	// delete, is freed now (see quarantine.go). The caller may reserve the
	// key again.
	WriteDeleted
)

var statusNames = [...]string{
	OK:              "OK",
	KeyNotExist:     "KEY_NOT_EXIST",
	KeyNotReadable:  "KEY_NOT_READABLE",
	KeyNotWritable:  "KEY_NOT_WRITABLE",
	KeyInWrongState: "KEY_IN_WRONG_STATE",
	KeyIsLocked:     "KEY_IS_LOCKED",
	OutOfMemory:     "OUT_OF_MEMORY",
	StaleLease:      "STALE_LEASE",
	Skipped:         "SKIPPED",
	WriteLapsed:     "WRITE_LAPSED",
	WriteDeleted:    "WRITE_DELETED",
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

// Lease names one holder of a lock, so that a holder whose lock lapsed
// cannot act on a lock someone else took since (see the package doc,
// "Leases"). Leases come from one counter per manager, are unique and grow
// with every lease handed out; 0 is never a valid lease.
//
//   - ReserveWrite hands each granted key a new write lease; FinishWrite,
//     AbortWrite and FinishWriteAndReserveRead must present it.
//   - ReserveRead and FinishWriteAndReserveRead hand out the key's read
//     lease: the read lock's epoch, which changes whenever the lock goes
//     from not held (never taken, released to zero, or lapsed) to held.
//     Every holder of one epoch shares its lease; FinishRead must present
//     it.
type Lease uint64

// Result is the outcome of one key of a call that hands out memory or
// locks. Block is the object's block and Lease the caller's lease (see
// Lease) when Status is OK; both are zero otherwise.
type Result struct {
	Status Status
	Block  allocator.Block
	Lease  Lease
}

// Errors. Per-key outcomes are Statuses; an error means the whole call was
// refused or failed, and the manager is as it was before the call, except
// for expired objects it reclaimed and objects it evicted on the way.
var (
	// ErrInvalidArgument wraps every rejection of a call's arguments or of
	// a Config. Nothing has changed when it is returned.
	ErrInvalidArgument = errors.New("l1: invalid argument")
	// ErrClosed is returned by every call that names keys or changes
	// anything after Close (see Close).
	ErrClosed = errors.New("l1: manager closed")
)
