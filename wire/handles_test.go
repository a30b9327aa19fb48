package wire_test

import (
	"encoding/binary"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// TestHandlesRoundTrip: every call that may name its keys by handle
// encodes and decodes by handle on a version 2 decoder, with extreme
// handles and leases, in exactly 48 + 12n bytes.
func TestHandlesRoundTrip(t *testing.T) {
	handles := []uint32{0, 1, 0xffffffff, 7, 7}
	leases := []l1.Lease{0, 1, ^l1.Lease(0), 5, 5}
	for _, typ := range []wire.Type{wire.TypeFinishWrite, wire.TypeAbortWrite, wire.TypeFinishWriteAndReserveRead, wire.TypeFinishRead, wire.TypeDelete} {
		q := wire.Request{Type: typ, ID: 9, Epoch: 3, Handles: handles, Leases: leases}
		switch typ {
		case wire.TypeFinishWriteAndReserveRead, wire.TypeFinishRead:
			q.Locks = 128
		case wire.TypeDelete:
			q.Flags = wire.FlagForce
		}
		var e wire.Encoder
		b, err := e.AppendRequest(nil, &q)
		if err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		if len(b) != 48+12*len(handles) {
			t.Fatalf("%v: %d bytes, want %d", typ, len(b), 48+12*len(handles))
		}
		d := wire.Decoder{Version: wire.Version2}
		var got wire.Request
		if err := d.DecodeRequest(b, &got); err != nil {
			t.Fatalf("%v: %v", typ, err)
		}
		q.Flags |= wire.FlagHandles
		if !got.Equal(&q) || len(got.Keys) != 0 {
			t.Fatalf("%v: decoded %+v, want %+v", typ, got, q)
		}
		// A version 1 decoder refuses it: the flag is undefined there.
		var d1 wire.Decoder
		refused(t, typ.String()+" by handle, version 1", d1.DecodeRequest(b, &got), wire.ErrBadFrame, "flags not defined")
	}
}

// TestHandlesMaxKeys: MaxKeys handles fit a frame, one more is refused by
// the encoder and, written by hand, by the decoder.
func TestHandlesMaxKeys(t *testing.T) {
	n := wire.MaxKeys
	q := wire.Request{Type: wire.TypeFinishWrite, Handles: make([]uint32, n), Leases: make([]l1.Lease, n)}
	var e wire.Encoder
	b, err := e.AppendRequest(nil, &q)
	if err != nil {
		t.Fatal(err)
	}
	d := wire.Decoder{Version: wire.Version2}
	var got wire.Request
	if err := d.DecodeRequest(b, &got); err != nil || len(got.Handles) != n {
		t.Fatalf("%d handles: %v, %d decoded", n, err, len(got.Handles))
	}
	q.Handles, q.Leases = append(q.Handles, 1), append(q.Leases, 1)
	_, err = e.AppendRequest(nil, &q)
	refused(t, "MaxKeys+1 handles", err, wire.ErrInvalidArgument, "exceed the limit")
	binary.LittleEndian.PutUint32(b[wire.HeaderSize+16:], uint32(n+1))
	refused(t, "a count of MaxKeys+1", d.DecodeRequest(b, &got), wire.ErrBadFrame, "exceeds the limit")
}

// TestHandlesEncoderRefuses: what a call by handle cannot carry.
func TestHandlesEncoderRefuses(t *testing.T) {
	k := []l1.ObjectKey{{ChunkHash: "a"}}
	for _, c := range []struct {
		name string
		q    wire.Request
		says string
	}{
		{"reserve_read", wire.Request{Type: wire.TypeReserveRead, Locks: 1, Handles: []uint32{1}, Leases: []l1.Lease{1}}, "takes no handles"},
		{"touch", wire.Request{Type: wire.TypeTouch, Flags: wire.FlagHandles}, "takes no handles"},
		{"keys beside", wire.Request{Type: wire.TypeFinishWrite, Keys: k, Handles: []uint32{1}, Leases: []l1.Lease{1}}, "by handle only"},
		{"leases short", wire.Request{Type: wire.TypeFinishWrite, Handles: []uint32{1, 2}, Leases: []l1.Lease{1}}, "1 leases for 2 handles"},
		{"locks in finish_write", wire.Request{Type: wire.TypeFinishWrite, Locks: 1, Handles: []uint32{1}, Leases: []l1.Lease{1}}, "no such parameter"},
		{"force in finish_read", wire.Request{Type: wire.TypeFinishRead, Locks: 1, Flags: wire.FlagForce, Handles: []uint32{1}, Leases: []l1.Lease{1}}, "no such parameter"},
	} {
		var e wire.Encoder
		b, err := e.AppendRequest([]byte("x"), &c.q)
		refused(t, c.name, err, wire.ErrInvalidArgument, c.says)
		if string(b) != "x" {
			t.Errorf("%s: dst changed to %q", c.name, b)
		}
	}
}

// TestResultHandle: a result's handle is its bytes 4 to 7, which a
// version 1 decoder refuses as reserved, and bytes 1 to 3 stay reserved in
// version 2; the hello answer's versions likewise.
func TestResultHandle(t *testing.T) {
	a := wire.Answer{Type: wire.TypeReserveWrite.Answer(), ID: 1, Epoch: 2,
		Results: []wire.Result{{Status: wire.StatusOK, Block: allocator.Block{Offset: 4096, Size: 4096, Gen: 1}, Lease: 9, Handle: 0xffffffff}}}
	var e wire.Encoder
	b, err := e.AppendAnswer(nil, &a)
	if err != nil {
		t.Fatal(err)
	}
	at := wire.HeaderSize + 8
	if got := binary.LittleEndian.Uint32(b[at+4:]); got != 0xffffffff {
		t.Fatalf("handle bytes %#x", got)
	}
	d2 := wire.Decoder{Version: wire.Version2}
	var got wire.Answer
	if err := d2.DecodeAnswer(b, &got); err != nil || !got.Equal(&a) {
		t.Fatalf("version 2: %+v, %v", got, err)
	}
	var d1 wire.Decoder
	refused(t, "a handle, version 1", d1.DecodeAnswer(b, &got), wire.ErrBadFrame, "reserved bytes")
	b[at+1] = 1
	refused(t, "byte 1, version 2", d2.DecodeAnswer(b, &got), wire.ErrBadFrame, "reserved bytes")

	h := wire.Answer{Type: wire.TypeHello.Answer(), ID: 1, Hello: wire.Hello{Version: wire.Version2, Versions: wire.Versions, MaxKeys: 1, MaxFrame: 1}}
	b, _ = e.AppendAnswer(nil, &h)
	if err := d2.DecodeAnswer(b, &got); err != nil || got.Hello != h.Hello {
		t.Fatalf("version 2 hello answer: %+v, %v", got.Hello, err)
	}
	refused(t, "versions, version 1", d1.DecodeAnswer(b, &got), wire.ErrBadFrame, "hello reserved field")
}

// TestHelloVersions: a hello of version 1 or 2 decodes; 0 and 3 are
// BAD_VERSION.
func TestHelloVersions(t *testing.T) {
	var e wire.Encoder
	var d wire.Decoder
	for v := uint32(0); v <= 3; v++ {
		b, _ := e.AppendRequest(nil, &wire.Request{Type: wire.TypeHello, Version: v})
		var q wire.Request
		err := d.DecodeRequest(b, &q)
		if v == wire.Version || v == wire.Version2 {
			if err != nil || q.Version != v {
				t.Errorf("version %d: %v", v, err)
			}
			continue
		}
		refused(t, "hello version", err, wire.ErrBadVersion, "speaks 1 to 2")
	}
}
