package wire

import (
	"encoding/binary"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Answer is one decoded answer frame. An answer with a Code other than
// CodeOK carries only Message; otherwise its type says which of the other
// fields it fills (PROTOCOL.md).
type Answer struct {
	Type  Type // with AnswerBit
	ID    uint32
	Code  Code
	Epoch uint64

	// Message explains a Code other than CodeOK.
	Message string
	// Hello is the hello answer's body.
	Hello Hello
	// Results: one per key, in request order, for reserve_write,
	// finish_write_and_reserve_read, reserve_read and reserve_read_prefix.
	Results []Result
	// Prefix is reserve_read_prefix's n: the keys locked, results[:n].
	Prefix uint32
	// Statuses: one per key, in request order, for finish_write,
	// abort_write, finish_read and delete.
	Statuses []Status
	// Stats is the stats answer's body.
	Stats Stats
	// Lookup is the lookup answer's body.
	Lookup Lookup
}

// Lookup is the lookup answer's body, 16 bytes:
//
//	u32 n         the keys asked about
//	u32 l1        keys [0, l1) are readable in L1
//	u32 l2        keys [l1, l1+l2) are in L2
//	u32 prefetch  keys [l1, l1+prefetch) the daemon began loading into L1
//
// A decoder refuses l1+l2 > n and prefetch > l2.
type Lookup struct {
	N, L1, L2, Prefetch uint32
}

// Result is one key's outcome in an answer that hands out memory or locks:
// the Block (offset into the pool, size, generation) and the Lease when
// Status is StatusOK, zero otherwise. On the wire, 40 bytes:
//
//	u8  status
//	u8  reserved[3]  0
//	u32 handle       version 2: the connection's handle of the lock; else 0
//	u64 block offset
//	u64 block size
//	u64 block generation
//	u64 lease
type Result struct {
	Status Status
	Block  allocator.Block
	Lease  l1.Lease
	// Handle is, on a version 2 connection, the handle that names the
	// lock's record (PROTOCOL.md, "Version 2: key handles"); 0 when Status
	// is not StatusOK, and always 0 in version 1.
	Handle uint32
}

const resultSize = 40

// Hello is the hello answer's body, 32 bytes:
//
//	u32 version      the protocol version the daemon speaks
//	u32 max keys     MaxKeys
//	u32 max frame    MaxFrame
//	u32 versions     version 2: the versions the daemon speaks, bit v for
//	                 version v (Versions); version 1: reserved, 0
//	u64 pool size    bytes of the memfd (the client maps all of it)
//	u64 align        the block alignment
//
// The pool's epoch is the answer header's Epoch. The memfd travels with the
// first byte of this frame, in an SCM_RIGHTS control message.
type Hello struct {
	Version           uint32
	MaxKeys, MaxFrame uint32
	// Versions is the versions field: Versions in the answer to a
	// version 2 hello, 0 in version 1.
	Versions        uint32
	PoolSize, Align int64
}

const helloSize = 32

// Stats is the stats answer: the daemon's, its manager's and its
// allocator's figures of one moment. On the wire: u32 count, u32 reserved,
// then count u64 values in the order of the fields below. A decoder takes
// the fields it knows and ignores the rest, so the daemon may append fields
// without a new version.
type Stats struct {
	Objects, WriteLocked, TemporaryReadLocked uint64 // l1.Stats
	HeldBytes, UsedBytes, CapacityBytes       uint64 // l1 held; the allocator's used and (ready) capacity
	QuarantinedBytes                          uint64 // lapsed writes of live owners, kept from other writers
	PoolBytes, ReadyBytes                     uint64 // the memfd's size; bytes populated (and pinned) so far
	ConnsOpen, ConnsAccepted, ConnsClosed     uint64 // connections now, ever accepted, ever closed
	ConnsRefused                              uint64 // peers refused by the allowlist
	ReleasedWrites, ReleasedReadLocks         uint64 // aborted and released because their connection ended
	ReleasedBytes                             uint64 // bytes those releases freed
	WriteReservations, PartialGrants          uint64 // l1.Counters
	FailedReservations, OOMKeys               uint64
	Evictions, OnDemandEvictions, Expired     uint64
	FreeErrors                                uint64
	Quarantines                               uint64 // lapsed writes quarantined
	// Lookups are l1's lookup counters, by l1.LookupKind (read,
	// read_prefix, unsafe_read, write): calls, and the keys they named by
	// outcome.
	Lookups [l1.NumLookupKinds]l1.LookupCounts
}

// fields lists s's fields in wire order.
func (s *Stats) fields() []*uint64 {
	f := []*uint64{
		&s.Objects, &s.WriteLocked, &s.TemporaryReadLocked,
		&s.HeldBytes, &s.UsedBytes, &s.CapacityBytes, &s.QuarantinedBytes,
		&s.PoolBytes, &s.ReadyBytes,
		&s.ConnsOpen, &s.ConnsAccepted, &s.ConnsClosed, &s.ConnsRefused,
		&s.ReleasedWrites, &s.ReleasedReadLocks, &s.ReleasedBytes,
		&s.WriteReservations, &s.PartialGrants, &s.FailedReservations, &s.OOMKeys,
		&s.Evictions, &s.OnDemandEvictions, &s.Expired, &s.FreeErrors,
		&s.Quarantines,
	}
	for k := range s.Lookups {
		c := &s.Lookups[k]
		f = append(f, &c.Calls, &c.Hits, &c.Misses, &c.Skipped)
	}
	return f
}

// StatsNames are the wire names of Stats' fields, in wire order.
var StatsNames = []string{
	"objects", "write_locked", "temporary_read_locked",
	"held_bytes", "used_bytes", "capacity_bytes", "quarantined_bytes",
	"pool_bytes", "ready_bytes",
	"conns_open", "conns_accepted", "conns_closed", "conns_refused",
	"released_writes", "released_read_locks", "released_bytes",
	"write_reservations", "partial_grants", "failed_reservations", "oom_keys",
	"evictions", "on_demand_evictions", "expired", "free_errors",
	"quarantines",
	"lookups_read_calls", "lookups_read_hits", "lookups_read_misses", "lookups_read_skipped",
	"lookups_read_prefix_calls", "lookups_read_prefix_hits", "lookups_read_prefix_misses", "lookups_read_prefix_skipped",
	"lookups_unsafe_read_calls", "lookups_unsafe_read_hits", "lookups_unsafe_read_misses", "lookups_unsafe_read_skipped",
	"lookups_write_calls", "lookups_write_hits", "lookups_write_misses", "lookups_write_skipped",
}

// Values returns the fields' values in wire order, named by StatsNames.
func (s *Stats) Values() []uint64 {
	f := s.fields()
	out := make([]uint64, len(f))
	for i, p := range f {
		out[i] = *p
	}
	return out
}

// SetValues sets the fields from values in wire order, as a decoder
// does: the values past the known fields are ignored, missing ones left
// as they are.
func (s *Stats) SetValues(values []uint64) {
	for i, p := range s.fields() {
		if i < len(values) {
			*p = values[i]
		}
	}
}

// maxStats bounds the count a decoder accepts: room for growth, and a
// bound on what a frame can make it loop over.
const maxStats = 1024

// AppendAnswer appends a as one frame to dst. An answer with a Code other
// than CodeOK carries its Message (cut to MaxMessageLen bytes) and nothing
// else. The error, an *Error with CodeInvalidArgument, says what the frame
// cannot hold (a type that is not an answer, too many results), and dst is
// returned as it was.
func (e *Encoder) AppendAnswer(dst []byte, a *Answer) ([]byte, error) {
	t := a.Type
	if t&AnswerBit == 0 || !t.Known() {
		return dst, errorf(CodeInvalidArgument, "%v is not an answer type", t)
	}
	if t == TypeError && a.Code == CodeOK {
		return dst, errorf(CodeInvalidArgument, "an error answer needs a code")
	}
	start := len(dst)
	var hdr [HeaderSize]byte
	dst = append(dst, hdr[:]...)
	switch {
	case a.Code != CodeOK:
		msg := a.Message
		if len(msg) > MaxMessageLen {
			msg = msg[:MaxMessageLen]
		}
		dst = put16(dst, uint16(len(msg)))
		dst = append(dst, msg...)
	case t.Request() == TypeHello:
		h := a.Hello
		dst = put32(dst, h.Version)
		dst = put32(dst, h.MaxKeys)
		dst = put32(dst, h.MaxFrame)
		dst = put32(dst, h.Versions)
		dst = put64(dst, uint64(h.PoolSize))
		dst = put64(dst, uint64(h.Align))
	case t.Request() == TypeStats:
		f := a.Stats.fields()
		dst = put32(dst, uint32(len(f)))
		dst = put32(dst, 0)
		for _, p := range f {
			dst = put64(dst, *p)
		}
	case t.Request() == TypeLookup:
		l := a.Lookup
		if l.N > MaxKeys || uint64(l.L1)+uint64(l.L2) > uint64(l.N) || l.Prefetch > l.L2 {
			return dst[:start], errorf(CodeInvalidArgument, "lookup counts %+v are not consistent", l)
		}
		dst = put32(dst, l.N)
		dst = put32(dst, l.L1)
		dst = put32(dst, l.L2)
		dst = put32(dst, l.Prefetch)
	case t.HasResults():
		if len(a.Results) > MaxKeys {
			return dst[:start], errorf(CodeInvalidArgument, "%d results exceed MaxKeys", len(a.Results))
		}
		dst = AppendResultsHeader(dst, len(a.Results), a.Prefix)
		at := len(dst)
		dst = slices.Grow(dst, resultSize*len(a.Results))[:at+resultSize*len(a.Results)]
		for i := range a.Results {
			putResult(dst[at+resultSize*i:], &a.Results[i])
		}
	case t.hasStatuses():
		if len(a.Statuses) > MaxKeys {
			return dst[:start], errorf(CodeInvalidArgument, "%d statuses exceed MaxKeys", len(a.Statuses))
		}
		dst = put32(dst, uint32(len(a.Statuses)))
		dst = put32(dst, 0)
		for _, s := range a.Statuses {
			dst = append(dst, uint8(s))
		}
	}
	size := len(dst) - start
	if size > MaxFrame {
		return dst[:start], errorf(CodeInvalidArgument, "%v frame of %d bytes exceeds MaxFrame", t, size)
	}
	Header{Size: uint32(size), Type: t, ID: a.ID, Code: a.Code, Epoch: a.Epoch}.Put(dst[start:])
	return dst, nil
}

// AppendResultsHeader appends the 8 bytes that open a results body: the
// count and reserve_read_prefix's prefix. With AppendResult it lets a
// server write results without building an Answer.
func AppendResultsHeader(dst []byte, n int, prefix uint32) []byte {
	dst = put32(dst, uint32(n))
	return put32(dst, prefix)
}

// AppendResult appends one 40-byte result record.
func AppendResult(dst []byte, r *Result) []byte {
	at := len(dst)
	dst = slices.Grow(dst, resultSize)[:at+resultSize]
	putResult(dst[at:], r)
	return dst
}

// putResult writes r's 40 bytes at the start of b.
func putResult(b []byte, r *Result) {
	_ = b[resultSize-1]
	binary.LittleEndian.PutUint64(b[0:], uint64(r.Status)|uint64(r.Handle)<<32)
	binary.LittleEndian.PutUint64(b[8:], uint64(r.Block.Offset))
	binary.LittleEndian.PutUint64(b[16:], uint64(r.Block.Size))
	binary.LittleEndian.PutUint64(b[24:], r.Block.Gen)
	binary.LittleEndian.PutUint64(b[32:], uint64(r.Lease))
}

// DecodeAnswer decodes the answer frame (header included, exactly the
// header's Size bytes) into a, reusing its slices. A frame that breaks a
// rule of PROTOCOL.md returns an *Error with CodeBadFrame (or
// CodeTooLarge, CodeUnknownType). An answer whose Code is not CodeOK
// decodes without error: its Code and Message are the daemon's refusal,
// which Answer.Err returns.
func (d *Decoder) DecodeAnswer(frame []byte, a *Answer) error {
	h, err := ParseHeader(frame)
	if err != nil {
		return err
	}
	if int(h.Size) != len(frame) {
		return errorf(CodeBadFrame, "header says %d bytes, frame has %d", h.Size, len(frame))
	}
	if h.Type&AnswerBit == 0 {
		return errorf(CodeBadFrame, "%v sent as an answer", h.Type)
	}
	if h.Type == TypeError && h.Code == CodeOK {
		return errorf(CodeBadFrame, "an error answer with code OK")
	}
	*a = Answer{Type: h.Type, ID: h.ID, Code: h.Code, Epoch: h.Epoch, Results: a.Results[:0], Statuses: a.Statuses[:0]}
	r := &reader{b: frame[HeaderSize:]}
	t := h.Type.Request()
	switch {
	case h.Code != CodeOK:
		n := int(r.u16("message length"))
		if n > MaxMessageLen {
			r.fail(CodeBadFrame, "message length %d exceeds the limit %d", n, MaxMessageLen)
		}
		a.Message = string(r.bytes(n, "message"))
	case t == TypeHello:
		a.Hello.Version = r.u32("version")
		a.Hello.MaxKeys = r.u32("max keys")
		a.Hello.MaxFrame = r.u32("max frame")
		if v := r.u32("hello versions"); d.Version >= Version2 {
			a.Hello.Versions = v
		} else {
			r.zero(uint64(v), "hello reserved field")
		}
		a.Hello.PoolSize = int64(r.u64("pool size"))
		a.Hello.Align = int64(r.u64("align"))
	case t == TypeStats:
		n := r.count(8, maxStats, "stats count")
		r.zero(uint64(r.u32("stats reserved")), "stats reserved field")
		f := a.Stats.fields()
		for i := 0; i < n; i++ {
			v := r.u64("stats value")
			if i < len(f) {
				*f[i] = v
			}
		}
	case h.Type.HasResults():
		n := r.count(resultSize, MaxKeys, "result count")
		a.Prefix = r.u32("prefix")
		if !t.hasPrefix() {
			r.zero(uint64(a.Prefix), "prefix (unused by "+t.String()+")")
		} else if a.Prefix > uint32(n) {
			r.fail(CodeBadFrame, "prefix %d exceeds the %d results", a.Prefix, n)
		}
		b := r.bytes(n*resultSize, "results")
		reserved := ^uint64(0xff) // version 1: bytes 1 to 7
		if d.Version >= Version2 {
			reserved = 0xffffff00 // bytes 1 to 3; 4 to 7 are the handle
		}
		for i := 0; i+resultSize <= len(b); i += resultSize {
			x := b[i : i+resultSize]
			w := le64(x[0:])
			if w&reserved != 0 {
				r.fail(CodeBadFrame, "result %d: reserved bytes are not 0", i/resultSize)
				break
			}
			a.Results = append(a.Results, Result{
				Status: Status(x[0]),
				Block:  allocator.Block{Offset: int64(le64(x[8:])), Size: int64(le64(x[16:])), Gen: le64(x[24:])},
				Lease:  l1.Lease(le64(x[32:])),
				Handle: uint32(w >> 32),
			})
		}
	case t == TypeLookup:
		l := Lookup{N: r.u32("lookup n"), L1: r.u32("lookup l1"), L2: r.u32("lookup l2"), Prefetch: r.u32("lookup prefetch")}
		switch {
		case l.N > MaxKeys:
			r.fail(CodeBadFrame, "lookup n %d exceeds MaxKeys", l.N)
		case uint64(l.L1)+uint64(l.L2) > uint64(l.N):
			r.fail(CodeBadFrame, "lookup l1 %d + l2 %d exceeds n %d", l.L1, l.L2, l.N)
		case l.Prefetch > l.L2:
			r.fail(CodeBadFrame, "lookup prefetch %d exceeds l2 %d", l.Prefetch, l.L2)
		}
		a.Lookup = l
	case h.Type.hasStatuses():
		n := r.count(1, MaxKeys, "status count")
		r.zero(uint64(r.u32("statuses reserved")), "statuses reserved field")
		for _, v := range r.bytes(n, "statuses") {
			a.Statuses = append(a.Statuses, Status(v))
		}
	}
	r.end()
	if r.err != nil {
		return r.err
	}
	return nil
}

// Err returns the daemon's refusal as an *Error, or nil when Code is
// CodeOK.
func (a *Answer) Err() error {
	if a.Code == CodeOK {
		return nil
	}
	return &Error{Code: a.Code, Msg: a.Message}
}

// Equal reports whether a and o are the same message: every field equal,
// nil and empty slices alike.
func (a *Answer) Equal(o *Answer) bool {
	return a.Type == o.Type && a.ID == o.ID && a.Code == o.Code && a.Epoch == o.Epoch &&
		a.Message == o.Message && a.Hello == o.Hello && a.Prefix == o.Prefix && a.Stats == o.Stats && a.Lookup == o.Lookup &&
		slices.Equal(a.Results, o.Results) && slices.Equal(a.Statuses, o.Statuses)
}
