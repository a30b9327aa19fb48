package wire

import (
	"encoding/binary"
	"slices"

	"github.com/kvalloc/kvalloc/l1"
)

// Request is one decoded request frame. Which fields a type uses is in
// PROTOCOL.md; the others are zero.
//
// A keyed request's body is its parameters, 16 bytes,
//
//	u64 size    reserve_write: bytes per object (two's complement);
//	            reserve_read_prefix_wait: the wait in microseconds;
//	            lookup: the budget in microseconds (0: none); else 0
//	u32 locks   the read-lock count of finish_write_and_reserve_read,
//	            reserve_read, reserve_read_prefix, reserve_read_prefix_wait
//	            and finish_read; else 0
//	u8  mode    reserve_write: l1.Mode (0 all, 1 new, 2 update); else 0
//	u8  flags   FlagTemporary, FlagPositions (reserve_write), FlagForce
//	            (delete), FlagPrefetch (lookup), FlagSizes (lookup,
//	            reserve_read_prefix_wait); else 0
//	u16 reserved 0
//
// then the keys block (keys.go), then, in this order and only where the
// type or the flags call for them, one byte per key of temporary flags (0
// or 1), one u32 per key of chain positions, one i64 per key of expected
// sizes, and one u64 per key of leases.
//
// In version 2 a call by handle (FlagHandles: finish_write, abort_write,
// finish_write_and_reserve_read, finish_read, delete) carries, after the
// parameters, the handles block in place of the keys block, and a lease
// per handle:
//
//	u32 n        ≤ MaxKeys
//	u32 reserved 0
//	n × u32      the handles
//	n × u64      the leases
type Request struct {
	Type  Type
	ID    uint32
	Epoch uint64

	// Version is the hello's protocol version.
	Version uint32

	Size      int64
	Locks     uint32
	Mode      l1.Mode
	Flags     uint8
	Keys      []l1.ObjectKey
	Temporary []bool   // with FlagTemporary: one per key
	Positions []uint32 // with FlagPositions: one per key
	// Sizes (with FlagSizes; lookup, reserve_read_prefix_wait): the
	// payload size the reader expects of each key's object, one per key.
	// The codec carries any value; the daemon answers one below 1
	// INVALID_ARGUMENT.
	Sizes  []int64
	Leases []l1.Lease // finish_write, abort_write, finish_write_and_reserve_read, finish_read; every call by handle
	// Handles (version 2): the keys of a call by handle, one per lease;
	// set, or FlagHandles in Flags, makes the call one by handle, with no
	// Keys.
	Handles []uint32
}

// ByHandles reports whether q names its keys by handle.
func (q *Request) ByHandles() bool { return q.Flags&FlagHandles != 0 || len(q.Handles) > 0 }

const paramsSize = 16

// params reports which parameters a keyed type may set.
func params(t Type) (size, locks, mode bool, flags uint8) {
	switch t {
	case TypeReserveWrite:
		return true, false, true, FlagTemporary | FlagPositions
	case TypeFinishWriteAndReserveRead, TypeReserveRead, TypeReserveReadPrefix, TypeFinishRead:
		return false, true, false, 0
	case TypeReserveReadPrefixWait:
		return true, true, false, FlagSizes
	case TypeDelete:
		return false, false, false, FlagForce
	case TypeLookup:
		return true, false, false, FlagPrefetch | FlagSizes
	}
	return false, false, false, 0
}

// Encoder encodes frames; its scratch (the string table) is reused from
// frame to frame. The zero Encoder is ready. It is not safe for concurrent
// use.
type Encoder struct {
	table stringTable
	ids   []uint16
}

// AppendRequest appends q as one frame to dst. It checks what the frame
// cannot express: a type that is not a request, more than MaxKeys keys,
// a string longer than MaxStringLen, temporary flags, positions or leases
// that are not one per key, parameters the type does not take, a frame
// over MaxFrame; and for a call by handle (version 2), a type that takes
// no handles, keys beside the handles, leases not one per handle. It
// encodes a call by handle whatever version the connection speaks: the
// caller sends one only on a version 2 connection. The error is an *Error with CodeInvalidArgument, and dst
// is returned as it was.
func (e *Encoder) AppendRequest(dst []byte, q *Request) ([]byte, error) {
	t := q.Type
	if t&AnswerBit != 0 || !t.Known() {
		return dst, errorf(CodeInvalidArgument, "%v is not a request type", t)
	}
	start := len(dst)
	var hdr [HeaderSize]byte
	dst = append(dst, hdr[:]...)
	out, err := e.appendBody(dst, q)
	if err != nil {
		return dst[:start], err
	}
	size := len(out) - start
	if size > MaxFrame {
		return dst[:start], errorf(CodeInvalidArgument, "%v frame of %d bytes exceeds MaxFrame (%d)", t, size, MaxFrame)
	}
	Header{Size: uint32(size), Type: t, ID: q.ID, Epoch: q.Epoch}.Put(out[start:])
	return out, nil
}

func (e *Encoder) appendBody(dst []byte, q *Request) ([]byte, error) {
	t := q.Type
	switch {
	case t == TypeHello:
		dst = append(dst, Magic...)
		return put32(dst, q.Version), nil
	case !t.Keyed():
		return dst, nil
	case q.ByHandles():
		return appendByHandle(dst, q)
	}
	sizeOK, locksOK, modeOK, flagsOK := params(t)
	flags := q.Flags &^ (FlagTemporary | FlagPositions)
	if len(q.Temporary) > 0 {
		flags |= FlagTemporary
	}
	if len(q.Positions) > 0 {
		flags |= FlagPositions
	}
	if len(q.Sizes) > 0 {
		flags |= FlagSizes
	}
	n := len(q.Keys)
	switch {
	case !sizeOK && q.Size != 0, !locksOK && q.Locks != 0, !modeOK && q.Mode != 0, flags&^flagsOK != 0:
		return dst, errorf(CodeInvalidArgument, "%v takes no such parameter (size %d, locks %d, mode %d, flags %#x)", t, q.Size, q.Locks, q.Mode, flags)
	case flags&FlagTemporary != 0 && len(q.Temporary) != n:
		return dst, errorf(CodeInvalidArgument, "%d temporary flags for %d keys", len(q.Temporary), n)
	case flags&FlagPositions != 0 && len(q.Positions) != n:
		return dst, errorf(CodeInvalidArgument, "%d positions for %d keys", len(q.Positions), n)
	case flags&FlagSizes != 0 && len(q.Sizes) != n:
		return dst, errorf(CodeInvalidArgument, "%d expected sizes for %d keys", len(q.Sizes), n)
	case t.HasLeases() && len(q.Leases) != n:
		return dst, errorf(CodeInvalidArgument, "%d leases for %d keys", len(q.Leases), n)
	case !t.HasLeases() && len(q.Leases) != 0:
		return dst, errorf(CodeInvalidArgument, "%v takes no leases", t)
	}
	dst = put64(dst, uint64(q.Size))
	dst = put32(dst, q.Locks)
	dst = append(dst, uint8(q.Mode), flags)
	dst = put16(dst, 0)
	dst, err := e.appendKeys(dst, q.Keys)
	if err != nil {
		return dst, err
	}
	if flags&FlagTemporary != 0 {
		for _, tmp := range q.Temporary {
			var b byte
			if tmp {
				b = 1
			}
			dst = append(dst, b)
		}
	}
	if flags&FlagPositions != 0 {
		for _, p := range q.Positions {
			dst = put32(dst, p)
		}
	}
	if flags&FlagSizes != 0 {
		for _, z := range q.Sizes {
			dst = put64(dst, uint64(z))
		}
	}
	for _, l := range q.Leases {
		dst = put64(dst, uint64(l))
	}
	return dst, nil
}

// appendByHandle appends the body of a call by handle.
func appendByHandle(dst []byte, q *Request) ([]byte, error) {
	t := q.Type
	sizeOK, locksOK, modeOK, flagsOK := params(t)
	flags := q.Flags | FlagHandles
	n := len(q.Handles)
	switch {
	case !t.ByHandle():
		return dst, errorf(CodeInvalidArgument, "%v takes no handles", t)
	case len(q.Keys) != 0 || len(q.Temporary) != 0 || len(q.Positions) != 0 || len(q.Sizes) != 0:
		return dst, errorf(CodeInvalidArgument, "%v by handle carries %d keys, %d temporary flags, %d positions: it names its keys by handle only", t, len(q.Keys), len(q.Temporary), len(q.Positions))
	case n > MaxKeys:
		return dst, errorf(CodeInvalidArgument, "%d handles exceed the limit %d", n, MaxKeys)
	case len(q.Leases) != n:
		return dst, errorf(CodeInvalidArgument, "%d leases for %d handles", len(q.Leases), n)
	case !sizeOK && q.Size != 0, !locksOK && q.Locks != 0, !modeOK && q.Mode != 0, flags&^(flagsOK|FlagHandles) != 0:
		return dst, errorf(CodeInvalidArgument, "%v takes no such parameter (size %d, locks %d, mode %d, flags %#x)", t, q.Size, q.Locks, q.Mode, flags)
	}
	at := len(dst)
	size := paramsSize + 8 + 12*n
	dst = slices.Grow(dst, size)[:at+size]
	b := dst[at:]
	binary.LittleEndian.PutUint64(b[0:], uint64(q.Size))
	binary.LittleEndian.PutUint32(b[8:], q.Locks)
	b[12], b[13] = uint8(q.Mode), flags
	binary.LittleEndian.PutUint16(b[14:], 0)
	binary.LittleEndian.PutUint32(b[16:], uint32(n))
	binary.LittleEndian.PutUint32(b[20:], 0)
	h := b[24:]
	for i, v := range q.Handles {
		binary.LittleEndian.PutUint32(h[4*i:], v)
	}
	l := h[4*n:]
	for i, v := range q.Leases {
		binary.LittleEndian.PutUint64(l[8*i:], uint64(v))
	}
	return dst, nil
}

// Decoder decodes frames into caller-owned Requests and Answers, reusing
// their slices and its own scratch. The zero Decoder is ready. It is not
// safe for concurrent use.
//
// A decoded Request's Keys slice is the Decoder's and is overwritten by
// the next DecodeRequest; the keys in it are values and may be kept,
// unless Borrow is set.
type Decoder struct {
	// Borrow makes the chunk hashes of the keys of every keyed request but
	// reserve_write alias the frame, which costs no allocation and no copy:
	// such keys are valid only while the frame's bytes are unchanged, and
	// whoever keeps one must copy its ChunkHash (strings.Clone). A
	// reserve_write's keys, which a manager keeps, own their hashes
	// whatever Borrow says, and models and salts are always the Decoder's
	// own strings. The daemon sets it: its connections call l1, which keeps
	// no key of a lookup, and their ledgers copy what they keep.
	Borrow bool
	// Version is the protocol version of the connection whose frames it
	// decodes; 0 is Version (1). Version 2 allows what version 2 adds:
	// calls by handle (FlagHandles), the handle of a result, the versions
	// of a hello answer. Version 1 refuses them, as the reserved fields
	// and undefined flags they are there (CodeBadFrame).
	Version uint32

	keys        []l1.ObjectKey
	strs        []string
	interned    map[string]string
	internedLen int // bytes of the interned strings
}

// DecodeRequest decodes the request frame (header included, exactly the
// header's Size bytes) into q. A frame that breaks a rule of PROTOCOL.md
// returns an *Error (CodeBadFrame, CodeTooLarge, CodeUnknownType, or
// CodeBadVersion for a hello with another magic or version) and leaves q
// partly written. It never panics, whatever the bytes.
func (d *Decoder) DecodeRequest(frame []byte, q *Request) error {
	h, err := ParseHeader(frame)
	if err != nil {
		return err
	}
	if int(h.Size) != len(frame) {
		return errorf(CodeBadFrame, "header says %d bytes, frame has %d", h.Size, len(frame))
	}
	if h.Type&AnswerBit != 0 {
		return errorf(CodeBadFrame, "%v sent as a request", h.Type)
	}
	*q = Request{Type: h.Type, ID: h.ID, Epoch: h.Epoch,
		Keys: q.Keys[:0], Temporary: q.Temporary[:0], Positions: q.Positions[:0], Sizes: q.Sizes[:0], Leases: q.Leases[:0], Handles: q.Handles[:0]}
	r := &reader{b: frame[HeaderSize:]}
	switch {
	case h.Type == TypeHello:
		magic := r.bytes(len(Magic), "hello magic")
		q.Version = r.u32("hello version")
		r.end()
		if r.err != nil {
			return r.err
		}
		if string(magic) != Magic {
			return errorf(CodeBadVersion, "hello magic %q, want %q", magic, Magic)
		}
		if q.Version < Version || q.Version > MaxVersion {
			return errorf(CodeBadVersion, "protocol version %d; this daemon speaks %d to %d", q.Version, Version, MaxVersion)
		}
		return nil
	case !h.Type.Keyed():
		r.end()
		if r.err != nil {
			return r.err
		}
		return nil
	}
	d.readRequestBody(r, q)
	r.end()
	if r.err != nil {
		return r.err
	}
	return nil
}

func (d *Decoder) readRequestBody(r *reader, q *Request) {
	t := q.Type
	sizeOK, locksOK, modeOK, flagsOK := params(t)
	size := r.u64("size")
	q.Locks = r.u32("locks")
	mode := r.u8("mode")
	q.Flags = r.u8("flags")
	r.zero(uint64(r.u16("parameters reserved")), "parameters reserved field")
	q.Size, q.Mode = int64(size), l1.Mode(mode)
	if !sizeOK {
		r.zero(size, "size (unused by "+t.String()+")")
	}
	if !locksOK {
		r.zero(uint64(q.Locks), "locks (unused by "+t.String()+")")
	}
	if !modeOK {
		r.zero(uint64(mode), "mode (unused by "+t.String()+")")
	}
	if d.Version >= Version2 && t.ByHandle() {
		flagsOK |= FlagHandles
	}
	r.zero(uint64(q.Flags&^flagsOK), "flags not defined for "+t.String())
	if r.err != nil {
		return
	}
	if q.Flags&FlagHandles != 0 {
		readByHandle(r, q)
		return
	}
	q.Keys = d.readKeys(r, t == TypeReserveWrite)
	n := len(q.Keys)
	if q.Flags&FlagTemporary != 0 {
		b := r.bytes(n, "temporary flags")
		for i, v := range b {
			if v > 1 {
				r.fail(CodeBadFrame, "temporary flag %d is %d, not 0 or 1", i, v)
				return
			}
			q.Temporary = append(q.Temporary, v == 1)
		}
	}
	if q.Flags&FlagPositions != 0 {
		b := r.bytes(4*n, "positions")
		for i := 0; i+4 <= len(b); i += 4 {
			q.Positions = append(q.Positions, uint32(b[i])|uint32(b[i+1])<<8|uint32(b[i+2])<<16|uint32(b[i+3])<<24)
		}
	}
	if q.Flags&FlagSizes != 0 {
		b := r.bytes(8*n, "expected sizes")
		for i := 0; i+8 <= len(b); i += 8 {
			q.Sizes = append(q.Sizes, int64(le64(b[i:])))
		}
	}
	if t.HasLeases() {
		b := r.bytes(8*n, "leases")
		for i := 0; i+8 <= len(b); i += 8 {
			q.Leases = append(q.Leases, l1.Lease(le64(b[i:])))
		}
	}
}

// readByHandle reads the handles block and the leases of a call by handle.
func readByHandle(r *reader, q *Request) {
	n := r.count(12, MaxKeys, "handle count")
	r.zero(uint64(r.u32("handles reserved")), "handles reserved field")
	hb := r.bytes(4*n, "handles")
	lb := r.bytes(8*n, "leases")
	if r.err != nil {
		return
	}
	q.Handles = slices.Grow(q.Handles[:0], n)[:n]
	q.Leases = slices.Grow(q.Leases[:0], n)[:n]
	for i := range n {
		q.Handles[i] = binary.LittleEndian.Uint32(hb[4*i:])
		q.Leases[i] = l1.Lease(le64(lb[8*i:]))
	}
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// Equal reports whether q and o are the same message: every field equal,
// nil and empty slices alike.
func (q *Request) Equal(o *Request) bool {
	return q.Type == o.Type && q.ID == o.ID && q.Epoch == o.Epoch && q.Version == o.Version &&
		q.Size == o.Size && q.Locks == o.Locks && q.Mode == o.Mode && q.Flags == o.Flags &&
		slices.Equal(q.Keys, o.Keys) && slices.Equal(q.Temporary, o.Temporary) &&
		slices.Equal(q.Positions, o.Positions) && slices.Equal(q.Sizes, o.Sizes) && slices.Equal(q.Leases, o.Leases) && slices.Equal(q.Handles, o.Handles)
}
