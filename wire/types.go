package wire

import (
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
)

// Version is protocol version 1, the first: a hello with it gets a
// version 1 connection, which never sees a handle.
const Version = 1

// Version2 is protocol version 2: version 1 plus key handles (PROTOCOL.md,
// "Version 2: key handles"). A hello with it gets a version 2 connection.
const Version2 = 2

// MaxVersion is the highest version this package speaks. A hello with a
// version outside [Version, MaxVersion] is refused with CodeBadVersion.
const MaxVersion = Version2

// Versions is the hello answer's versions field on a version 2
// connection: bit v for each version v this package speaks.
const Versions = 1<<Version | 1<<Version2

// Magic opens every hello request: "KVAL".
const Magic = "KVAL"

// Limits. Every one is checked before the bytes it bounds are used.
const (
	// HeaderSize is the size of a frame header.
	HeaderSize = 24
	// MaxFrame is the largest frame, header included: 16 MiB, which holds
	// MaxKeys keys with 200-byte chunk hashes, or their answers.
	MaxFrame = 16 << 20
	// MaxKeys is the most keys one request names: 65,536, well above the
	// 10,000 a serving engine's largest batch needs.
	MaxKeys = 1 << 16
	// MaxStringLen is the longest chunk hash, model name or cache salt, in
	// bytes.
	MaxStringLen = 4096
	// MaxStrings is the most entries in a request's string table (the
	// models and salts its keys name).
	MaxStrings = 4096
	// MaxMessageLen is the longest error message in an answer.
	MaxMessageLen = 4096
)

// Type is a message type. An answer's type is its request's with
// AnswerBit set.
type Type uint16

// Message types.
const (
	TypeHello                     Type = 0x0001
	TypePing                      Type = 0x0002
	TypeStats                     Type = 0x0003
	TypeReserveWrite              Type = 0x0010
	TypeFinishWrite               Type = 0x0011
	TypeAbortWrite                Type = 0x0012
	TypeFinishWriteAndReserveRead Type = 0x0013
	TypeReserveRead               Type = 0x0014
	TypeReserveReadPrefix         Type = 0x0015
	TypeFinishRead                Type = 0x0016
	TypeDelete                    Type = 0x0017
	TypeTouch                     Type = 0x0018
	// TypeLookup reports how much of a prompt L1 and L2 hold, and with
	// FlagPrefetch starts loading the L2 part into L1 (PROTOCOL.md, "The
	// L2 tier").
	TypeLookup Type = 0x0019
	// TypeReserveReadPrefixWait is reserve_read_prefix after waiting, up
	// to Size microseconds, for the daemon's prefetch of the keys.
	TypeReserveReadPrefixWait Type = 0x001A

	// AnswerBit marks an answer.
	AnswerBit Type = 0x8000
	// TypeError is the answer to a frame whose type could not be read (a
	// header too short, too large, or of an unknown type). It always
	// carries a Code other than CodeOK.
	TypeError Type = AnswerBit
)

// Types lists every request type, in the order PROTOCOL.md gives them.
var Types = []Type{
	TypeHello, TypePing, TypeStats, TypeReserveWrite, TypeFinishWrite, TypeAbortWrite,
	TypeFinishWriteAndReserveRead, TypeReserveRead, TypeReserveReadPrefix, TypeFinishRead,
	TypeDelete, TypeTouch, TypeLookup, TypeReserveReadPrefixWait,
}

var typeNames = map[Type]string{
	TypeHello: "hello", TypePing: "ping", TypeStats: "stats",
	TypeReserveWrite: "reserve_write", TypeFinishWrite: "finish_write", TypeAbortWrite: "abort_write",
	TypeFinishWriteAndReserveRead: "finish_write_and_reserve_read", TypeReserveRead: "reserve_read",
	TypeReserveReadPrefix: "reserve_read_prefix", TypeFinishRead: "finish_read",
	TypeDelete: "delete", TypeTouch: "touch",
	TypeLookup: "lookup", TypeReserveReadPrefixWait: "reserve_read_prefix_wait",
}

// String returns the message's name, e.g. "reserve_write", or
// "reserve_write answer"; TypeError is "error".
func (t Type) String() string {
	if t == TypeError {
		return "error"
	}
	if n, ok := typeNames[t&^AnswerBit]; ok {
		if t&AnswerBit != 0 {
			return n + " answer"
		}
		return n
	}
	return fmt.Sprintf("Type(%#04x)", uint16(t))
}

// Request returns the request type of t (t without AnswerBit).
func (t Type) Request() Type { return t &^ AnswerBit }

// Answer returns the answer type of t.
func (t Type) Answer() Type { return t | AnswerBit }

// Known reports whether t, without AnswerBit, is a message type, or is
// TypeError.
func (t Type) Known() bool {
	_, ok := typeNames[t&^AnswerBit]
	return ok || t == TypeError
}

// Keyed reports whether requests of type t carry keys.
func (t Type) Keyed() bool {
	return t.Request() >= TypeReserveWrite && t.Request() <= TypeReserveReadPrefixWait
}

// HasLeases reports whether requests of type t carry one lease per key: the
// calls that finish a lock.
func (t Type) HasLeases() bool {
	switch t.Request() {
	case TypeFinishWrite, TypeAbortWrite, TypeFinishWriteAndReserveRead, TypeFinishRead:
		return true
	}
	return false
}

// HasResults reports whether answers of type t carry a Result per key
// (status, block, lease); the other keyed answers carry a Status per key.
func (t Type) HasResults() bool {
	switch t.Request() {
	case TypeReserveWrite, TypeFinishWriteAndReserveRead, TypeReserveRead, TypeReserveReadPrefix, TypeReserveReadPrefixWait:
		return true
	}
	return false
}

// hasPrefix reports whether answers of type t carry a prefix length.
func (t Type) hasPrefix() bool {
	return t.Request() == TypeReserveReadPrefix || t.Request() == TypeReserveReadPrefixWait
}

// hasStatuses reports whether answers of type t carry a Status per key.
func (t Type) hasStatuses() bool {
	switch t.Request() {
	case TypeFinishWrite, TypeAbortWrite, TypeFinishRead, TypeDelete:
		return true
	}
	return false
}

// Code is the call-level outcome of an answer: CodeOK, or why the whole
// request was refused. Per-key outcomes are Statuses.
type Code uint32

// Codes. After the ones marked "closes", the daemon closes the connection
// once the answer is written, and releases everything the connection held.
const (
	// CodeOK: the request was carried out; per-key outcomes follow.
	CodeOK Code = 0
	// CodeBadFrame: the frame breaks a rule of PROTOCOL.md (a length that
	// overruns the frame, a nonzero reserved field, a string index out of
	// range, trailing bytes). Closes.
	CodeBadFrame Code = 1
	// CodeTooLarge: the header announces a frame larger than MaxFrame, or
	// smaller than a header. Closes.
	CodeTooLarge Code = 2
	// CodeUnknownType: the header names no request type. Closes.
	CodeUnknownType Code = 3
	// CodeBadVersion: the hello's magic or version is not this daemon's.
	// Closes.
	CodeBadVersion Code = 4
	// CodeNoHello: the first request of a connection was not a hello, or a
	// second hello came. Closes.
	CodeNoHello Code = 5
	// CodeWrongEpoch: the request's epoch is not the daemon's: its leases
	// and blocks are from an earlier daemon. Nothing changed; the
	// connection stays open.
	CodeWrongEpoch Code = 6
	// CodeInvalidArgument: the request is well formed but l1 refuses its
	// arguments (a size ≤ 0, an unknown mode, a lock count outside [1,
	// 128], leases or flags not one per key). Nothing changed; the
	// connection stays open.
	CodeInvalidArgument Code = 7
	// CodeClosed: the daemon is shutting down. Closes.
	CodeClosed Code = 8
	// CodeNotAllowed: the peer's uid and gid are not on the daemon's
	// allowlist. Sent at once after accept, before any request. Closes.
	CodeNotAllowed Code = 9
	// CodeTimeout: a frame was begun and not finished within the daemon's
	// frame timeout, or a connection sent no whole hello within its hello
	// timeout. Closes.
	CodeTimeout Code = 10
	// CodeInternal: the daemon failed in a way the request did not cause.
	// The connection stays open.
	CodeInternal Code = 11
	// CodeTooManyConnections: the daemon is at its cap on connections, in
	// total or for the peer's uid, or out of file descriptors. Sent at once
	// after accept, before any request, as a hello answer. Closes.
	CodeTooManyConnections Code = 12
	// CodeBusy: the daemon's budget for frame buffers, shared by every
	// connection, stayed spent for the frame timeout: the request was read
	// and dropped, nothing changed, and it may be sent again. The
	// connection stays open.
	CodeBusy Code = 13
)

var codeNames = [...]string{
	CodeOK: "OK", CodeBadFrame: "BAD_FRAME", CodeTooLarge: "TOO_LARGE", CodeUnknownType: "UNKNOWN_TYPE",
	CodeBadVersion: "BAD_VERSION", CodeNoHello: "NO_HELLO", CodeWrongEpoch: "WRONG_EPOCH",
	CodeInvalidArgument: "INVALID_ARGUMENT", CodeClosed: "CLOSED", CodeNotAllowed: "NOT_ALLOWED",
	CodeTimeout: "TIMEOUT", CodeInternal: "INTERNAL", CodeTooManyConnections: "TOO_MANY_CONNECTIONS",
	CodeBusy: "BUSY",
}

// String returns the code's name, e.g. "BAD_FRAME".
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", uint32(c))
}

// Closes reports whether the daemon closes the connection after an answer
// with this code.
func (c Code) Closes() bool {
	switch c {
	case CodeBadFrame, CodeTooLarge, CodeUnknownType, CodeBadVersion, CodeNoHello, CodeClosed, CodeNotAllowed, CodeTimeout,
		CodeTooManyConnections:
		return true
	}
	return false
}

// Status is the outcome of one key. Values 0 to 31 are l1's statuses with
// l1's values (l1.Status); 32 and up are the daemon's own, about who owns a
// lock.
type Status uint8

// Statuses.
const (
	StatusOK              = Status(l1.OK)
	StatusKeyNotExist     = Status(l1.KeyNotExist)
	StatusKeyNotReadable  = Status(l1.KeyNotReadable)
	StatusKeyNotWritable  = Status(l1.KeyNotWritable)
	StatusKeyInWrongState = Status(l1.KeyInWrongState)
	StatusKeyIsLocked     = Status(l1.KeyIsLocked)
	StatusOutOfMemory     = Status(l1.OutOfMemory)
	StatusStaleLease      = Status(l1.StaleLease)
	StatusSkipped         = Status(l1.Skipped)
	StatusWriteLapsed     = Status(l1.WriteLapsed)
	StatusWriteDeleted    = Status(l1.WriteDeleted)

	// StatusNotOwner: the lease is not one this connection holds (another
	// connection's, or one it already gave back). Nothing changed.
	StatusNotOwner Status = 32
	// StatusOverRelease: finish_read would release more read locks than
	// this connection holds on the key under that lease. Nothing changed.
	StatusOverRelease Status = 33
	// StatusOverLimit: granting the key would take the connection past one
	// of the daemon's per-connection limits (read locks held, write bytes
	// reserved). The key, and every key after it in the request, was not
	// passed to l1: nothing changed for them (PROTOCOL.md, "Limits").
	StatusOverLimit Status = 34
	// StatusSizeMismatch: reserve_read_prefix_wait with expected sizes
	// (FlagSizes) found the key's object finished with another size than
	// the request expects for it (another engine's layout of the same
	// key). The key was not locked and nothing changed: a miss, and the
	// prefix stops there (PROTOCOL.md, "Expected sizes").
	StatusSizeMismatch Status = 35
)

// l1Statuses is the boundary: below it a Status is an l1.Status.
const l1Statuses = 32

// String returns the status's name: l1's for l1's statuses (e.g.
// "KEY_NOT_EXIST"), "NOT_OWNER", "OVER_RELEASE", "OVER_LIMIT" and
// "SIZE_MISMATCH" for the daemon's.
func (s Status) String() string {
	switch {
	case s == StatusNotOwner:
		return "NOT_OWNER"
	case s == StatusOverRelease:
		return "OVER_RELEASE"
	case s == StatusOverLimit:
		return "OVER_LIMIT"
	case s == StatusSizeMismatch:
		return "SIZE_MISMATCH"
	case s < l1Statuses:
		return l1.Status(s).String()
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// FromL1 converts an l1 status.
func FromL1(s l1.Status) Status { return Status(s) }

// Flags of a keyed request's parameters.
const (
	// FlagTemporary: reserve_write carries one temporary flag per key.
	FlagTemporary uint8 = 1 << 0
	// FlagPositions: reserve_write carries one chain position per key
	// (l1.ReserveWriteChain), l1.Partial in the top bit.
	FlagPositions uint8 = 1 << 1
	// FlagForce: delete removes objects in any state.
	FlagForce uint8 = 1 << 2
	// FlagPrefetch: lookup starts loading the keys L2 holds into L1.
	FlagPrefetch uint8 = 1 << 3
	// FlagHandles (version 2 only): finish_write, abort_write,
	// finish_write_and_reserve_read, finish_read or delete names its keys
	// by the connection's handles, each with its lease, in place of the
	// keys block.
	FlagHandles uint8 = 1 << 4
	// FlagSizes: lookup or reserve_read_prefix_wait carries one expected
	// payload size per key (an i64, at least 1) after the keys block: a
	// key is a hit only when its object, or its L2 value, is exactly that
	// size (PROTOCOL.md, "Expected sizes").
	FlagSizes uint8 = 1 << 5
)

// ByHandle reports whether requests of type t may name their keys by
// handle (FlagHandles) on a version 2 connection.
func (t Type) ByHandle() bool {
	switch t.Request() {
	case TypeFinishWrite, TypeAbortWrite, TypeFinishWriteAndReserveRead, TypeFinishRead, TypeDelete:
		return true
	}
	return false
}

// MaxWait is the longest wait reserve_read_prefix_wait takes, in
// microseconds (its Size): 10 s.
const MaxWait = 10_000_000
