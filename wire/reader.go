package wire

import "encoding/binary"

// reader reads little-endian fields from a frame body, checking each
// length against the bytes left. The first failure sticks: later reads
// return zeros, and err names the first field that did not fit.
type reader struct {
	b   []byte
	off int
	err *Error
}

// need reports whether n more bytes are there, recording a failure named
// what when they are not.
func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = errorf(CodeBadFrame, "%s: %d bytes needed at offset %d, %d left", what, n, r.off+HeaderSize, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) u8(what string) uint8 {
	if !r.need(1, what) {
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) u16(what string) uint16 {
	if !r.need(2, what) {
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(what string) uint64 {
	if !r.need(8, what) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

// bytes returns the next n bytes, aliasing the frame.
func (r *reader) bytes(n int, what string) []byte {
	if !r.need(n, what) {
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

// zero records a failure unless v is 0: a reserved field or an unused
// parameter.
func (r *reader) zero(v uint64, what string) {
	if r.err == nil && v != 0 {
		r.err = errorf(CodeBadFrame, "%s is %d, must be 0", what, v)
	}
}

// fail records a failure.
func (r *reader) fail(code Code, format string, args ...any) {
	if r.err == nil {
		r.err = errorf(code, format, args...)
	}
}

// end records a failure unless every byte was read.
func (r *reader) end() {
	if r.err == nil && r.off != len(r.b) {
		r.err = errorf(CodeBadFrame, "%d trailing bytes after the body", len(r.b)-r.off)
	}
}

// count reads a u32 count of items of size bytes each, checked against
// limit and against the bytes left, so that a slice of that many can be
// made without trusting the frame.
func (r *reader) count(size, limit int, what string) int {
	n := r.u32(what)
	switch {
	case r.err != nil:
		return 0
	case uint64(n) > uint64(limit):
		r.fail(CodeBadFrame, "%s %d exceeds the limit %d", what, n, limit)
		return 0
	case uint64(n)*uint64(size) > uint64(len(r.b)-r.off):
		r.fail(CodeBadFrame, "%s %d: %d bytes needed, %d left", what, n, uint64(n)*uint64(size), len(r.b)-r.off)
		return 0
	}
	return int(n)
}

// appenders: little-endian fields onto a buffer.

func put16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func put32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func put64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
