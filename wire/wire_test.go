package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// randKeys returns n keys over a few models and salts, with hashes of 0 to
// 64 bytes.
func randKeys(rng *rand.Rand, n int) []l1.ObjectKey {
	models := []string{"llama-3.1-70b", "qwen2-7b", ""}
	salts := []string{"", "tenant-a", "tenant-b"}
	keys := make([]l1.ObjectKey, n)
	for i := range keys {
		h := make([]byte, rng.IntN(65))
		for j := range h {
			h[j] = byte(rng.Uint32())
		}
		keys[i] = l1.ObjectKey{ChunkHash: string(h), Model: models[rng.IntN(len(models))], KVRank: rng.Uint32(),
			GroupID: rng.Uint32(), CacheSalt: salts[rng.IntN(len(salts))]}
	}
	return keys
}

// randRequest returns a random valid request of type t.
func randRequest(rng *rand.Rand, t wire.Type) wire.Request {
	q := wire.Request{Type: t, ID: rng.Uint32(), Epoch: rng.Uint64()}
	switch {
	case t == wire.TypeHello:
		q.Epoch, q.Version = 0, wire.Version
		return q
	case !t.Keyed():
		return q
	}
	n := rng.IntN(20)
	q.Keys = randKeys(rng, n)
	switch t {
	case wire.TypeReserveWrite:
		q.Size, q.Mode = rng.Int64(), l1.Mode(rng.IntN(3))
		if rng.IntN(2) == 0 && n > 0 {
			q.Temporary = make([]bool, n)
			for i := range q.Temporary {
				q.Temporary[i] = rng.IntN(2) == 0
			}
		}
		if rng.IntN(2) == 0 && n > 0 {
			q.Positions = make([]uint32, n)
			for i := range q.Positions {
				q.Positions[i] = rng.Uint32()
			}
		}
	case wire.TypeFinishWriteAndReserveRead, wire.TypeReserveRead, wire.TypeReserveReadPrefix, wire.TypeFinishRead:
		q.Locks = rng.Uint32()
	case wire.TypeDelete:
		if rng.IntN(2) == 0 {
			q.Flags = wire.FlagForce
		}
	case wire.TypeLookup:
		q.Size = rng.Int64() // the budget
		if rng.IntN(2) == 0 {
			q.Flags = wire.FlagPrefetch
		}
	case wire.TypeReserveReadPrefixWait:
		q.Size, q.Locks = rng.Int64(), rng.Uint32()
	}
	if t.HasLeases() {
		q.Leases = make([]l1.Lease, n)
		for i := range q.Leases {
			q.Leases[i] = l1.Lease(rng.Uint64())
		}
	}
	if len(q.Temporary) > 0 {
		q.Flags |= wire.FlagTemporary
	}
	if len(q.Positions) > 0 {
		q.Flags |= wire.FlagPositions
	}
	return q
}

// TestRequestRoundTrip encodes and decodes random requests of every type
// through one Encoder and one Decoder, reused as a connection reuses them.
func TestRequestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var e wire.Encoder
	var d wire.Decoder
	var got wire.Request
	var buf []byte
	for i := range 2000 {
		typ := wire.Types[i%len(wire.Types)]
		q := randRequest(rng, typ)
		var err error
		buf, err = e.AppendRequest(buf[:0], &q)
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if err := d.DecodeRequest(buf, &got); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if !q.Equal(&got) {
			t.Fatalf("%v: decoded\n%+v\nwant\n%+v", typ, got, q)
		}
	}
}

// TestAnswerRoundTrip does the same for answers.
func TestAnswerRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var e wire.Encoder
	var d wire.Decoder
	var got wire.Answer
	for i := range 2000 {
		typ := wire.Types[i%len(wire.Types)]
		a := wire.Answer{Type: typ.Answer(), ID: rng.Uint32(), Epoch: rng.Uint64()}
		n := rng.IntN(30)
		switch {
		case i%7 == 0:
			a.Code, a.Message = wire.Code(1+rng.IntN(11)), strings.Repeat("é", rng.IntN(50))
		case typ == wire.TypeHello:
			a.Hello = wire.Hello{Version: 1, MaxKeys: rng.Uint32(), MaxFrame: rng.Uint32(), PoolSize: rng.Int64(), Align: rng.Int64()}
		case typ == wire.TypeStats:
			vals := a.Stats.Values()
			for j := range vals {
				vals[j] = rng.Uint64()
			}
			a.Stats.SetValues(vals)
		case typ.HasResults():
			for range n {
				a.Results = append(a.Results, wire.Result{Status: wire.Status(rng.IntN(256)),
					Block: allocator.Block{Offset: rng.Int64(), Size: rng.Int64(), Gen: rng.Uint64()}, Lease: l1.Lease(rng.Uint64())})
			}
			if typ == wire.TypeReserveReadPrefix || typ == wire.TypeReserveReadPrefixWait {
				a.Prefix = uint32(rng.IntN(n + 1))
			}
		case typ == wire.TypeLookup:
			l1n := uint32(rng.IntN(n + 1))
			l2n := uint32(rng.IntN(n - int(l1n) + 1))
			a.Lookup = wire.Lookup{N: uint32(n), L1: l1n, L2: l2n, Prefetch: uint32(rng.IntN(int(l2n) + 1))}
		case typ.Keyed() && typ != wire.TypeTouch:
			for range n {
				a.Statuses = append(a.Statuses, wire.Status(rng.IntN(256)))
			}
		}
		b, err := e.AppendAnswer(nil, &a)
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if err := d.DecodeAnswer(b, &got); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if !a.Equal(&got) {
			t.Fatalf("%v: decoded\n%+v\nwant\n%+v", typ, got, a)
		}
		if (a.Code == wire.CodeOK) != (got.Err() == nil) {
			t.Fatalf("%v: Err %v for code %v", typ, got.Err(), a.Code)
		}
	}
}

// TestTenThousandKeys: one frame holds a serving engine's largest batch,
// 10,000 keys with 32-byte hashes, and far more.
func TestTenThousandKeys(t *testing.T) {
	for _, n := range []int{10_000, wire.MaxKeys} {
		keys := make([]l1.ObjectKey, n)
		for i := range keys {
			keys[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%032d", i), Model: "llama-3.1-70b"}
		}
		leases := make([]l1.Lease, n)
		var e wire.Encoder
		var d wire.Decoder
		b, err := e.AppendRequest(nil, &wire.Request{Type: wire.TypeFinishRead, Locks: 1, Keys: keys, Leases: leases})
		if err != nil {
			t.Fatal(err)
		}
		var q wire.Request
		if err := d.DecodeRequest(b, &q); err != nil {
			t.Fatal(err)
		}
		if len(q.Keys) != n || q.Keys[n-1] != keys[n-1] {
			t.Fatalf("%d keys decoded, last %v", len(q.Keys), q.Keys[len(q.Keys)-1])
		}
		res := make([]wire.Result, n)
		if _, err := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypeReserveWrite.Answer(), Results: res}); err != nil {
			t.Fatalf("%d results: %v", n, err)
		}
	}
}

// TestEncoderRefuses: what a frame cannot express is refused before
// anything is written.
func TestEncoderRefuses(t *testing.T) {
	k := []l1.ObjectKey{{ChunkHash: "h"}}
	long := strings.Repeat("x", wire.MaxStringLen+1)
	many := make([]l1.ObjectKey, wire.MaxStrings+1)
	for i := range many {
		many[i].Model = fmt.Sprint(i)
	}
	for _, c := range []struct {
		name string
		q    wire.Request
	}{
		{"answer type", wire.Request{Type: wire.TypePing.Answer()}},
		{"unknown type", wire.Request{Type: 0x77}},
		{"too many keys", wire.Request{Type: wire.TypeTouch, Keys: make([]l1.ObjectKey, wire.MaxKeys+1)}},
		{"long hash", wire.Request{Type: wire.TypeTouch, Keys: []l1.ObjectKey{{ChunkHash: long}}}},
		{"long model", wire.Request{Type: wire.TypeTouch, Keys: []l1.ObjectKey{{Model: long}}}},
		{"too many strings", wire.Request{Type: wire.TypeTouch, Keys: many}},
		{"short leases", wire.Request{Type: wire.TypeFinishWrite, Keys: k}},
		{"leases not taken", wire.Request{Type: wire.TypeTouch, Keys: k, Leases: []l1.Lease{1}}},
		{"short temporary", wire.Request{Type: wire.TypeReserveWrite, Size: 1, Keys: append(k, k...), Temporary: []bool{true}}},
		{"short positions", wire.Request{Type: wire.TypeReserveWrite, Size: 1, Keys: append(k, k...), Positions: []uint32{1}}},
		{"locks on finish_write", wire.Request{Type: wire.TypeFinishWrite, Locks: 1}},
		{"size on reserve_read", wire.Request{Type: wire.TypeReserveRead, Size: 1, Locks: 1}},
		{"mode on delete", wire.Request{Type: wire.TypeDelete, Mode: l1.ModeNew}},
		{"force on touch", wire.Request{Type: wire.TypeTouch, Flags: wire.FlagForce}},
		{"temporary on finish_read", wire.Request{Type: wire.TypeFinishRead, Locks: 1, Keys: k, Leases: []l1.Lease{1}, Temporary: []bool{true}}},
		{"frame too large", wire.Request{Type: wire.TypeTouch, Keys: func() []l1.ObjectKey {
			ks := make([]l1.ObjectKey, wire.MaxKeys)
			for i := range ks {
				ks[i].ChunkHash = strings.Repeat("h", 300)
			}
			return ks
		}()}},
	} {
		var e wire.Encoder
		dst := []byte("prefix")
		got, err := e.AppendRequest(dst, &c.q)
		if !errors.Is(err, wire.ErrInvalidArgument) || string(got) != "prefix" {
			t.Errorf("%s: %q, %v; want the buffer unchanged and INVALID_ARGUMENT", c.name, got, err)
		}
	}
	var e wire.Encoder
	if _, err := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypePing}); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Errorf("answer with a request type: %v", err)
	}
}

// TestAnswerMalformed: an answer decoder refuses what a request decoder
// would, and the answer rules of its own.
func TestAnswerMalformed(t *testing.T) {
	var e wire.Encoder
	ok, _ := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypeReserveRead.Answer(), Results: make([]wire.Result, 2)})
	pre, _ := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypeReserveReadPrefix.Answer(), Results: make([]wire.Result, 2)})
	msg, _ := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypePing.Answer(), Code: wire.CodeInternal, Message: "x"})
	set := func(b []byte, off int, v uint32) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	for name, b := range map[string][]byte{
		"request as answer":   set(ok, 4, uint32(wire.TypeReserveRead)),
		"prefix on read":      set(ok, wire.HeaderSize+4, 1),
		"prefix over count":   set(pre, wire.HeaderSize+4, 3),
		"result reserved":     set(ok, wire.HeaderSize+8+1, 1),
		"count overruns":      set(ok, wire.HeaderSize, 3),
		"message overruns":    append(bytes.Clone(msg[:wire.HeaderSize]), 200, 0, 'x'),
		"truncated":           ok[:len(ok)-1],
		"size over frame len": set(ok, 0, uint32(len(ok)+1)),
	} {
		var d wire.Decoder
		var a wire.Answer
		if err := d.DecodeAnswer(b, &a); !errors.Is(err, wire.ErrBadFrame) {
			t.Errorf("%s: %v, want BAD_FRAME", name, err)
		}
	}
}

// TestReadFrame: whole frames, EOF before and inside a frame, and a header
// that announces too much is refused before any body is read.
func TestReadFrame(t *testing.T) {
	var e wire.Encoder
	a, _ := e.AppendRequest(nil, &wire.Request{Type: wire.TypePing, ID: 1})
	b, _ := e.AppendRequest(nil, &wire.Request{Type: wire.TypeTouch, ID: 2, Keys: randKeys(rand.New(rand.NewPCG(5, 6)), 500)})
	r := bytes.NewReader(append(append([]byte{}, a...), b...))
	var buf []byte
	for _, want := range [][]byte{a, b} {
		got, err := wire.ReadFrame(r, buf)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadFrame: %d bytes, %v", len(got), err)
		}
		buf = got
	}
	if _, err := wire.ReadFrame(r, buf); err != io.EOF {
		t.Fatalf("at the end: %v, want EOF", err)
	}
	if _, err := wire.ReadFrame(bytes.NewReader(b[:len(b)-1]), nil); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut frame: %v, want ErrUnexpectedEOF", err)
	}
	big := bytes.Clone(a)
	binary.LittleEndian.PutUint32(big, math.MaxUint32)
	if _, err := wire.ReadFrame(io.MultiReader(bytes.NewReader(big), neverReader{t}), nil); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("4 GiB header: %v, want TOO_LARGE", err)
	}
}

// neverReader fails the test if read: the body of a refused header.
type neverReader struct{ t *testing.T }

func (n neverReader) Read([]byte) (int, error) {
	n.t.Fatal("the body of a refused frame was read")
	return 0, io.EOF
}

// TestNames: every type, code and status has a name, and the stats names
// match the fields.
func TestNames(t *testing.T) {
	for _, typ := range wire.Types {
		if strings.HasPrefix(typ.String(), "Type(") || !strings.HasSuffix(typ.Answer().String(), " answer") {
			t.Errorf("type %#x: %q", uint16(typ), typ)
		}
	}
	for c := wire.CodeOK; c <= wire.CodeBusy; c++ {
		if strings.HasPrefix(c.String(), "Code(") {
			t.Errorf("code %d unnamed", c)
		}
	}
	for _, s := range []wire.Status{wire.StatusOK, wire.StatusSkipped, wire.StatusNotOwner, wire.StatusOverRelease, wire.StatusOverLimit} {
		if strings.HasPrefix(s.String(), "Status(") {
			t.Errorf("status %d unnamed", s)
		}
	}
	if n := len(new(wire.Stats).Values()); n != len(wire.StatsNames) || n != 25+4*len(l1.LookupKinds) {
		t.Errorf("Stats has %d values, %d names", n, len(wire.StatsNames))
	}
	for i, k := range l1.LookupKinds {
		if want := "lookups_" + k.String() + "_calls"; wire.StatsNames[25+4*i] != want {
			t.Errorf("value %d is %q, want %q", 25+4*i, wire.StatsNames[25+4*i], want)
		}
	}
	if wire.Status(l1.Skipped) != wire.StatusSkipped || wire.FromL1(l1.StaleLease) != wire.StatusStaleLease {
		t.Error("statuses below 32 are not l1's")
	}
}

// TestEqual: Equal tells messages apart by every field, and takes nil and
// empty slices alike.
func TestEqual(t *testing.T) {
	q := wire.Request{Type: wire.TypeFinishRead, Locks: 1, Keys: []l1.ObjectKey{{ChunkHash: "a"}}, Leases: []l1.Lease{1}}
	e := q
	e.Temporary = []bool{}
	if !q.Equal(&e) {
		t.Fatal("an empty slice differs from nil")
	}
	for _, f := range []func(*wire.Request){
		func(r *wire.Request) { r.ID++ }, func(r *wire.Request) { r.Locks++ },
		func(r *wire.Request) { r.Keys = []l1.ObjectKey{{ChunkHash: "b"}} }, func(r *wire.Request) { r.Leases = []l1.Lease{2} },
	} {
		o := q
		f(&o)
		if q.Equal(&o) {
			t.Errorf("%+v equals %+v", q, o)
		}
	}
	a := wire.Answer{Type: wire.TypeFinishRead.Answer(), Statuses: []wire.Status{wire.StatusOK}}
	b := a
	b.Statuses = []wire.Status{wire.StatusNotOwner}
	c := a
	c.Stats.Objects = 1
	if a.Equal(&b) || a.Equal(&c) || !a.Equal(&a) {
		t.Error("Answer.Equal")
	}
}
