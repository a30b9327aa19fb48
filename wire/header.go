package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
)

// Header is the first HeaderSize bytes of every frame:
//
//	offset size field
//	0      4    Size   the whole frame in bytes, header included
//	4      2    Type   the message type (AnswerBit set in answers)
//	6      2    -      reserved, 0
//	8      4    ID     the request's id, chosen by the client; its answer echoes it
//	12     4    Code   answers: the call's Code; requests: 0
//	16     8    Epoch  requests: the pool epoch from the hello answer (0 in a
//	                   hello); answers: the daemon's epoch
type Header struct {
	Size  uint32
	Type  Type
	ID    uint32
	Code  Code
	Epoch uint64
}

// Put writes h into b[:HeaderSize].
func (h Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:], h.Size)
	binary.LittleEndian.PutUint16(b[4:], uint16(h.Type))
	binary.LittleEndian.PutUint16(b[6:], 0)
	binary.LittleEndian.PutUint32(b[8:], h.ID)
	binary.LittleEndian.PutUint32(b[12:], uint32(h.Code))
	binary.LittleEndian.PutUint64(b[16:], h.Epoch)
}

// ParseHeader reads a header from the first HeaderSize bytes of b and
// checks what a header alone can tell: the size within [HeaderSize,
// MaxFrame] (CodeTooLarge), a known type (CodeUnknownType), the reserved
// field zero and no code in a request (CodeBadFrame). It does not check
// that b holds Size bytes.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, errorf(CodeBadFrame, "header truncated: %d of %d bytes", len(b), HeaderSize)
	}
	h := Header{
		Size:  binary.LittleEndian.Uint32(b[0:]),
		Type:  Type(binary.LittleEndian.Uint16(b[4:])),
		ID:    binary.LittleEndian.Uint32(b[8:]),
		Code:  Code(binary.LittleEndian.Uint32(b[12:])),
		Epoch: binary.LittleEndian.Uint64(b[16:]),
	}
	switch {
	case h.Size < HeaderSize || h.Size > MaxFrame:
		return h, errorf(CodeTooLarge, "frame size %d outside [%d, %d]", h.Size, HeaderSize, MaxFrame)
	case !h.Type.Known():
		return h, errorf(CodeUnknownType, "unknown message type %#04x", uint16(h.Type))
	case binary.LittleEndian.Uint16(b[6:]) != 0:
		return h, errorf(CodeBadFrame, "reserved header field is %#04x, not 0", binary.LittleEndian.Uint16(b[6:]))
	case h.Type&AnswerBit == 0 && h.Code != CodeOK:
		return h, errorf(CodeBadFrame, "request carries code %d", uint32(h.Code))
	}
	return h, nil
}

// Error is a refusal: a frame that cannot be decoded, or an answer whose
// Code is not CodeOK. Its Code says which (see the Code constants).
type Error struct {
	Code Code
	Msg  string
}

// Error returns "kvalloc: CODE: message".
func (e *Error) Error() string {
	if e.Msg == "" {
		return "kvalloc: " + e.Code.String()
	}
	return "kvalloc: " + e.Code.String() + ": " + e.Msg
}

// Is matches any *Error with the same Code, so errors.Is(err, ErrBadFrame)
// holds for every malformed frame; CodeInvalidArgument also matches
// l1.ErrInvalidArgument and CodeClosed l1.ErrClosed, so that a caller tests
// a refusal the same way in process and through the daemon.
func (e *Error) Is(target error) bool {
	switch {
	case target == l1.ErrInvalidArgument:
		return e.Code == CodeInvalidArgument
	case target == l1.ErrClosed:
		return e.Code == CodeClosed
	}
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is, one per Code.
var (
	ErrBadFrame        = &Error{Code: CodeBadFrame}
	ErrTooLarge        = &Error{Code: CodeTooLarge}
	ErrUnknownType     = &Error{Code: CodeUnknownType}
	ErrBadVersion      = &Error{Code: CodeBadVersion}
	ErrNoHello         = &Error{Code: CodeNoHello}
	ErrWrongEpoch      = &Error{Code: CodeWrongEpoch}
	ErrInvalidArgument = &Error{Code: CodeInvalidArgument}
	ErrClosed          = &Error{Code: CodeClosed}
	ErrNotAllowed      = &Error{Code: CodeNotAllowed}
	ErrTimeout         = &Error{Code: CodeTimeout}
	ErrInternal        = &Error{Code: CodeInternal}
	// ErrTooManyConnections: the daemon refused the connection at its cap.
	ErrTooManyConnections = &Error{Code: CodeTooManyConnections}
	// ErrBusy: the daemon's frame buffers were spent; send the request again.
	ErrBusy = &Error{Code: CodeBusy}
)

func errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// AsError returns err as an *Error: itself when it is one, else an
// *Error with CodeInternal and err's text.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Msg: err.Error()}
}
