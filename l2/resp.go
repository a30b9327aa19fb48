package l2

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The piece path reads Redis's replies with its own reader, beside
// go-redis, for one reason: go-redis reads every bulk reply into a new
// buffer of its own, and the piece path wants each piece's bytes in the
// object's block, checked as they arrive, with no copy between. The
// reader knows the replies that path gets (RESP2, as a connection speaks
// before any HELLO): bulk strings and their null ($), status lines (+)
// and error lines (-). Anything else is ErrProtocol.

// ErrProtocol is wrapped by every refusal of RESPReader: bytes that are
// not a reply it reads (an unknown type, a malformed or overlong line or
// length, a bulk longer than its bound, a missing CRLF).
var ErrProtocol = errors.New("l2: bad RESP reply")

// MaxRESPLine is the longest status or error line RESPReader accepts,
// CRLF excluded (a MOVED or an OOM is under 100 bytes).
const MaxRESPLine = 512

// Reply is the start of one reply: its type and, for a bulk string, its
// length (-1 for the null bulk), or for a status or error line, its text.
type Reply struct {
	// Kind is '$' (bulk string), '+' (status) or '-' (error).
	Kind byte
	// Len is a bulk string's length in bytes, -1 for the null bulk.
	Len int64
	// Line is a status or error line's text, without its CRLF.
	Line string
}

// RESPReader reads the replies of one connection. A bulk string of n
// bytes is read by the caller into memory of its own: Next returns its
// length, then ReadBulk calls take exactly n bytes in all, in pieces of
// any size, straight from the connection when they are large, and
// EndBulk checks its CRLF (SkipBulk discards what is left instead). It
// never reads more of a reply than the reply's own bytes, never holds
// more than its buffer and one line, and refuses a bulk longer than its
// bound before reading any of it. After any error the connection's state
// is unknown and the reader must be dropped.
type RESPReader struct {
	r    *bufio.Reader
	max  int64
	left int64 // bytes of the open bulk not read; -1 when none is open
}

// respBuffer is the reader's buffer. It must hold the longest line
// (MaxRESPLine and its CRLF); a bulk's bytes, a piece's header and key
// among them, go through ReadBulk, which reads straight from the
// connection when asked for more than the buffer holds. The fill that
// brings a reply's head takes the payload bytes behind it too, and those
// are copied twice, so the buffer is no larger than a line needs,
// rounded up to a page.
const respBuffer = 4 << 10

// NewRESPReader returns a reader of r's replies that refuses a bulk
// string longer than max bytes.
func NewRESPReader(r io.Reader, max int64) *RESPReader {
	return &RESPReader{r: bufio.NewReaderSize(r, respBuffer), max: max, left: -1}
}

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// line reads one line, at most MaxRESPLine bytes before its CRLF, and
// returns it without the CRLF. The line may alias the reader's buffer
// until the next read.
func (r *RESPReader) line() ([]byte, error) {
	b, err := r.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(b) > MaxRESPLine+2 {
		return nil, protoErr("a line longer than %d bytes", MaxRESPLine)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return nil, protoErr("a line not ended by CRLF")
	}
	b = b[:len(b)-2]
	for _, c := range b {
		if c == '\r' {
			return nil, protoErr("a CR inside a line")
		}
	}
	return b, nil
}

// Next reads the start of the next reply. It returns io.EOF at a clean
// end between replies; a bulk left open by the previous reply is an
// error (the caller lost count of its bytes).
func (r *RESPReader) Next() (Reply, error) {
	if r.left >= 0 {
		return Reply{}, protoErr("the previous bulk has %d bytes left", r.left)
	}
	kind, err := r.r.ReadByte()
	if err != nil {
		return Reply{}, err // io.EOF: a clean end
	}
	b, err := r.line()
	if err != nil {
		return Reply{}, err
	}
	switch kind {
	case '+', '-':
		return Reply{Kind: kind, Line: string(b)}, nil
	case '$':
		n, err := parseLen(b)
		if err != nil {
			return Reply{}, err
		}
		if n > r.max {
			return Reply{}, protoErr("a bulk of %d bytes, over the bound of %d", n, r.max)
		}
		if n >= 0 {
			r.left = n
		}
		return Reply{Kind: kind, Len: n}, nil
	}
	return Reply{}, protoErr("reply type %q", kind)
}

// parseLen reads a bulk length: -1, or a decimal of at most 18 digits
// without a sign or leading zero.
func parseLen(b []byte) (int64, error) {
	if string(b) == "-1" {
		return -1, nil
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, protoErr("bulk length %q", b)
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, protoErr("bulk length %q", b)
		}
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, protoErr("bulk length %q", b)
	}
	return n, nil
}

// ReadBulk reads the next len(dst) bytes of the open bulk into dst; they
// must not be more than are left of it.
func (r *RESPReader) ReadBulk(dst []byte) error {
	if r.left < int64(len(dst)) {
		return protoErr("a read of %d bytes with %d left of the bulk", len(dst), max(r.left, 0))
	}
	n, err := io.ReadFull(r.r, dst)
	r.left -= int64(n)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// Left is how many bytes of the open bulk are still to be read (-1 when
// none is open).
func (r *RESPReader) Left() int64 { return r.left }

// EndBulk ends the open bulk, every byte of which was read, by its CRLF.
func (r *RESPReader) EndBulk() error {
	if r.left != 0 {
		return protoErr("the bulk ended with %d bytes unread", r.left)
	}
	var crlf [2]byte
	if _, err := io.ReadFull(r.r, crlf[:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if crlf != [2]byte{'\r', '\n'} {
		return protoErr("a bulk not ended by CRLF")
	}
	r.left = -1
	return nil
}

// SkipBulk discards what is left of the open bulk and ends it.
func (r *RESPReader) SkipBulk() error {
	if r.left < 0 {
		return protoErr("no bulk open")
	}
	n, err := r.r.Discard(int(r.left))
	r.left -= int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return r.EndBulk()
}
