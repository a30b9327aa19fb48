package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Every limit of PROTOCOL.md's Limits table, and every index check of the
// decoder, at its value, just under it and just over it: the codec
// accepts the first two, in both directions, and refuses the third, the
// encoder with INVALID_ARGUMENT and the decoder with BAD_FRAME or
// TOO_LARGE, never a panic.

// maxStats is PROTOCOL.md's stats count: the most values in a stats answer
// a decoder accepts.
const maxStats = 1024

// keyRecord is one raw key of a hand-made keys block.
type keyRecord struct {
	hash        string
	hashLen     int // the length field; -1 means len(hash)
	model, salt uint16
}

// keysFrame builds a touch request by hand, with any counts and indexes:
// nkeys and nstrings are the announced counts (-1: the true ones), and
// strs and ks what follows.
func keysFrame(nkeys, nstrings int, strs []string, strLens []int, ks []keyRecord) []byte {
	if nkeys < 0 {
		nkeys = len(ks)
	}
	if nstrings < 0 {
		nstrings = len(strs)
	}
	b := make([]byte, wire.HeaderSize+16, 1<<20)
	b = binary.LittleEndian.AppendUint32(b, uint32(nkeys))
	b = binary.LittleEndian.AppendUint16(b, uint16(nstrings))
	b = binary.LittleEndian.AppendUint16(b, 0)
	for i, s := range strs {
		l := len(s)
		if strLens != nil && strLens[i] >= 0 {
			l = strLens[i]
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(l))
		b = append(b, s...)
	}
	for _, k := range ks {
		l := k.hashLen
		if l < 0 {
			l = len(k.hash)
		}
		b = binary.LittleEndian.AppendUint16(b, uint16(l))
		b = binary.LittleEndian.AppendUint16(b, k.model)
		b = binary.LittleEndian.AppendUint16(b, k.salt)
		b = append(b, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0) // reserved, rank 1, group 2
		b = append(b, k.hash...)
	}
	wire.Header{Size: uint32(len(b)), Type: wire.TypeTouch, ID: 7, Epoch: 9}.Put(b)
	return b
}

// decodeRequest decodes b with a copying and a borrowing decoder; both
// must agree. It returns the keys and the error.
func decodeRequest(t *testing.T, b []byte) ([]l1.ObjectKey, error) {
	t.Helper()
	var q, qb wire.Request
	err := (&wire.Decoder{}).DecodeRequest(bytes.Clone(b), &q)
	errb := (&wire.Decoder{Borrow: true}).DecodeRequest(bytes.Clone(b), &qb)
	if (err == nil) != (errb == nil) || (err == nil && !slices.Equal(q.Keys, qb.Keys)) {
		t.Fatalf("copying decoder: %v; borrowing decoder: %v", err, errb)
	}
	return q.Keys, err
}

// refused checks err is an *wire.Error of code whose message says what.
func refused(t *testing.T, what string, err, code error, says string) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || !errors.Is(err, code) || !strings.Contains(we.Msg, says) {
		t.Errorf("%s: %v, want %v saying %q", what, err, code, says)
	}
}

// roundTrip encodes q, checks its size when size > 0, and decodes it back.
func roundTrip(t *testing.T, what string, q *wire.Request, size int) {
	t.Helper()
	var e wire.Encoder
	b, err := e.AppendRequest(nil, q)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if size > 0 && len(b) != size {
		t.Fatalf("%s: a frame of %d bytes, want %d", what, len(b), size)
	}
	keys, err := decodeRequest(t, b)
	if err != nil || !slices.Equal(keys, q.Keys) {
		t.Fatalf("%s: decoded %d keys, %v; want the %d sent", what, len(keys), err, len(q.Keys))
	}
}

// touchOfSize is a touch request whose frame is exactly size bytes (size
// at least 66): keys with empty models and salts (a table of one empty
// string) and chunk hashes of up to MaxStringLen bytes.
func touchOfSize(size int) *wire.Request {
	const fixed = wire.HeaderSize + 16 + 8 + 2 // header, parameters, keys block head, the table
	rest := size - fixed
	var keys []l1.ObjectKey
	for rest > 0 {
		hl := min(rest-16, wire.MaxStringLen)
		if left := rest - 16 - hl; left > 0 && left < 16 {
			hl -= 16 // leave room for one more key of its own
		}
		keys = append(keys, l1.ObjectKey{ChunkHash: strings.Repeat(string(rune('a'+len(keys)%26)), hl), KVRank: uint32(len(keys))})
		rest -= 16 + hl
	}
	return &wire.Request{Type: wire.TypeTouch, ID: 3, Epoch: 5, Keys: keys}
}

// TestLimitFrameSize: a frame of MaxFrame bytes is legal, header
// included, and one of MaxFrame+1 is not; the same at the small end.
func TestLimitFrameSize(t *testing.T) {
	for _, size := range []int{wire.MaxFrame - 1, wire.MaxFrame} {
		roundTrip(t, fmt.Sprintf("touch of %d bytes", size), touchOfSize(size), size)
	}
	var e wire.Encoder
	over := touchOfSize(wire.MaxFrame + 1)
	if b, err := e.AppendRequest([]byte("x"), over); !errors.Is(err, wire.ErrInvalidArgument) || string(b) != "x" {
		t.Errorf("touch of MaxFrame+1 bytes: %d bytes, %v; want INVALID_ARGUMENT and nothing appended", len(b), err)
	}
	ping, _ := e.AppendRequest(nil, &wire.Request{Type: wire.TypePing, ID: 1})
	for _, c := range []struct {
		size uint32
		ok   bool
	}{{0, false}, {wire.HeaderSize - 1, false}, {wire.HeaderSize, true}, {wire.HeaderSize + 1, true},
		{wire.MaxFrame - 1, true}, {wire.MaxFrame, true}, {wire.MaxFrame + 1, false}, {1<<32 - 1, false}} {
		h := bytes.Clone(ping)
		binary.LittleEndian.PutUint32(h, c.size)
		_, err := wire.ParseHeader(h)
		if c.ok && err != nil {
			t.Errorf("header of size %d: %v", c.size, err)
		}
		if !c.ok {
			refused(t, fmt.Sprintf("header of size %d", c.size), err, wire.ErrTooLarge, "outside")
		}
	}
	// ReadFrame reads a MaxFrame frame whole, and refuses MaxFrame+1 from
	// its header alone.
	b, _ := e.AppendRequest(nil, touchOfSize(wire.MaxFrame))
	got, err := wire.ReadFrame(bytes.NewReader(b), nil)
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("ReadFrame of MaxFrame bytes: %d bytes, %v", len(got), err)
	}
	binary.LittleEndian.PutUint32(b, wire.MaxFrame+1)
	if _, err := wire.ReadFrame(bytes.NewReader(b[:wire.HeaderSize]), nil); !errors.Is(err, wire.ErrTooLarge) {
		t.Fatalf("ReadFrame of a MaxFrame+1 header: %v, want TOO_LARGE", err)
	}
}

// emptyKeys are n keys of empty hash, model and salt.
func emptyKeys(n int) []l1.ObjectKey { return make([]l1.ObjectKey, n) }

// TestLimitKeys: MaxKeys keys in a request, and MaxKeys results or
// statuses in an answer; one more is refused.
func TestLimitKeys(t *testing.T) {
	for _, n := range []int{wire.MaxKeys - 1, wire.MaxKeys} {
		roundTrip(t, fmt.Sprintf("%d keys", n), &wire.Request{Type: wire.TypeTouch, Keys: emptyKeys(n)}, 0)
	}
	var e wire.Encoder
	if _, err := e.AppendRequest(nil, &wire.Request{Type: wire.TypeTouch, Keys: emptyKeys(wire.MaxKeys + 1)}); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Errorf("MaxKeys+1 keys encoded: %v", err)
	}
	recs := make([]keyRecord, wire.MaxKeys+1)
	_, err := decodeRequest(t, keysFrame(-1, -1, []string{""}, nil, recs))
	refused(t, "MaxKeys+1 keys decoded", err, wire.ErrBadFrame, "exceeds the limit")
	// A key count one past the keys sent, at the small end.
	_, err = decodeRequest(t, keysFrame(2, -1, []string{""}, nil, recs[:1]))
	refused(t, "2 keys announced, 1 sent", err, wire.ErrBadFrame, "key count")

	for _, ty := range []wire.Type{wire.TypeReserveRead, wire.TypeFinishRead} {
		for _, n := range []int{wire.MaxKeys - 1, wire.MaxKeys, wire.MaxKeys + 1} {
			a := wire.Answer{Type: ty.Answer(), ID: 1, Epoch: 2}
			if ty.HasResults() {
				a.Results = make([]wire.Result, n)
			} else {
				a.Statuses = make([]wire.Status, n)
			}
			b, err := e.AppendAnswer(nil, &a)
			if n > wire.MaxKeys {
				if !errors.Is(err, wire.ErrInvalidArgument) {
					t.Errorf("%v answer of %d: %v", ty, n, err)
				}
				// By hand: the count one over, with the bytes to match.
				b, _ = e.AppendAnswer(nil, &wire.Answer{Type: ty.Answer(), ID: 1, Epoch: 2})
				per := 1
				if ty.HasResults() {
					per = 40
				}
				b = append(b, make([]byte, per*n)...)
				binary.LittleEndian.PutUint32(b[wire.HeaderSize:], uint32(n))
				binary.LittleEndian.PutUint32(b, uint32(len(b)))
				var got wire.Answer
				refused(t, fmt.Sprintf("%v answer of %d decoded", ty, n), (&wire.Decoder{}).DecodeAnswer(b, &got), wire.ErrBadFrame, "exceeds the limit")
				continue
			}
			var got wire.Answer
			if err != nil || (&wire.Decoder{}).DecodeAnswer(b, &got) != nil || !got.Equal(&a) {
				t.Errorf("%v answer of %d: %v", ty, n, err)
			}
		}
	}
}

// TestLimitStrings: MaxStrings entries in a request's string table.
func TestLimitStrings(t *testing.T) {
	distinct := func(n int) []l1.ObjectKey { // one new string per key
		ks := make([]l1.ObjectKey, n)
		for i := range ks {
			ks[i].Model = fmt.Sprint(i)
			ks[i].CacheSalt = ks[i].Model
		}
		return ks
	}
	for _, n := range []int{wire.MaxStrings - 1, wire.MaxStrings} {
		roundTrip(t, fmt.Sprintf("%d strings", n), &wire.Request{Type: wire.TypeTouch, Keys: distinct(n)}, 0)
	}
	var e wire.Encoder
	if _, err := e.AppendRequest(nil, &wire.Request{Type: wire.TypeTouch, Keys: distinct(wire.MaxStrings + 1)}); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Errorf("MaxStrings+1 strings encoded: %v", err)
	}
	for _, n := range []int{wire.MaxStrings - 1, wire.MaxStrings, wire.MaxStrings + 1} {
		strs := make([]string, n)
		keys, err := decodeRequest(t, keysFrame(-1, -1, strs, nil, []keyRecord{{hashLen: -1, model: uint16(n - 1), salt: 0}}))
		switch {
		case n > wire.MaxStrings:
			refused(t, fmt.Sprintf("a table of %d strings", n), err, wire.ErrBadFrame, "string count")
		case err != nil || len(keys) != 1:
			t.Errorf("a table of %d strings: %v", n, err)
		}
	}
}

// TestLimitStringLen: a chunk hash, model or salt of MaxStringLen bytes.
func TestLimitStringLen(t *testing.T) {
	var e wire.Encoder
	for _, n := range []int{wire.MaxStringLen - 1, wire.MaxStringLen, wire.MaxStringLen + 1} {
		s := strings.Repeat("s", n)
		for _, k := range []l1.ObjectKey{{ChunkHash: s}, {Model: s}, {CacheSalt: s}, {ChunkHash: s, Model: s, CacheSalt: s}} {
			q := &wire.Request{Type: wire.TypeTouch, Keys: []l1.ObjectKey{{ChunkHash: "first"}, k}}
			long := max(len(k.ChunkHash), len(k.Model), len(k.CacheSalt)) > wire.MaxStringLen
			if long {
				if _, err := e.AppendRequest(nil, q); !errors.Is(err, wire.ErrInvalidArgument) {
					t.Errorf("a string of %d bytes encoded: %v", n, err)
				}
				continue
			}
			roundTrip(t, fmt.Sprintf("strings of %d bytes", n), q, 0)
		}
		// By hand: the table's string, and the hash, at each length.
		_, err := decodeRequest(t, keysFrame(-1, -1, []string{s}, nil, []keyRecord{{hash: s, hashLen: -1}}))
		if n > wire.MaxStringLen {
			refused(t, fmt.Sprintf("a table string of %d bytes", n), err, wire.ErrBadFrame, "length")
		} else if err != nil {
			t.Errorf("a table string and a hash of %d bytes: %v", n, err)
		}
		_, err = decodeRequest(t, keysFrame(-1, -1, []string{""}, nil, []keyRecord{{hash: s, hashLen: -1}}))
		if n > wire.MaxStringLen {
			refused(t, fmt.Sprintf("a hash of %d bytes", n), err, wire.ErrBadFrame, "hash length")
		}
	}
}

// TestStringIndexBound: a key's model or salt index must be under the
// table's length; an index equal to it, on any key, is BAD_FRAME.
func TestStringIndexBound(t *testing.T) {
	for _, ns := range []int{0, 1, 2, 7, wire.MaxStrings} {
		strs := make([]string, ns)
		for i := range strs {
			strs[i] = fmt.Sprint("s", i)
		}
		for _, idx := range []int{ns - 1, ns, ns + 1, 1<<16 - 1} {
			if idx < 0 || idx > 1<<16-1 {
				continue
			}
			for _, which := range []string{"model", "salt"} {
				for _, at := range []int{0, 2} { // the first key, the last
					recs := make([]keyRecord, 3)
					for i := range recs {
						recs[i].hash, recs[i].hashLen = "h", -1
					}
					if which == "model" {
						recs[at].model = uint16(idx)
					} else {
						recs[at].salt = uint16(idx)
					}
					keys, err := decodeRequest(t, keysFrame(-1, -1, strs, nil, recs))
					name := fmt.Sprintf("table of %d, key %d's %s index %d", ns, at, which, idx)
					if idx >= ns || ns == 0 {
						refused(t, name, err, wire.ErrBadFrame, "string index")
						continue
					}
					if err != nil {
						t.Errorf("%s: %v", name, err)
						continue
					}
					got := keys[at].Model
					if which == "salt" {
						got = keys[at].CacheSalt
					}
					if got != strs[idx] {
						t.Errorf("%s: decoded %q, want %q", name, got, strs[idx])
					}
				}
			}
		}
	}
}

// TestLimitMessage: an error answer's message of MaxMessageLen bytes; the
// encoder cuts a longer one to the limit, the decoder refuses it.
func TestLimitMessage(t *testing.T) {
	var e wire.Encoder
	for _, n := range []int{wire.MaxMessageLen - 1, wire.MaxMessageLen, wire.MaxMessageLen + 1} {
		msg := strings.Repeat("m", n)
		b, err := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypePing.Answer(), ID: 1, Code: wire.CodeInternal, Message: msg})
		var a wire.Answer
		if err == nil {
			err = (&wire.Decoder{}).DecodeAnswer(b, &a)
		}
		if want := msg[:min(n, wire.MaxMessageLen)]; err != nil || a.Message != want {
			t.Errorf("message of %d bytes: %d bytes back, %v; want %d", n, len(a.Message), err, len(want))
		}
		// By hand: the length field says n, and n bytes follow.
		raw := append(b[:wire.HeaderSize:wire.HeaderSize], byte(n), byte(n>>8))
		raw = append(raw, msg...)
		binary.LittleEndian.PutUint32(raw, uint32(len(raw)))
		err = (&wire.Decoder{}).DecodeAnswer(raw, &a)
		if n > wire.MaxMessageLen {
			refused(t, fmt.Sprintf("a message of %d bytes decoded", n), err, wire.ErrBadFrame, "message length")
		} else if err != nil || a.Message != msg {
			t.Errorf("a message of %d bytes decoded: %v", n, err)
		}
	}
}

// TestLimitStatsCount: a stats answer of up to 1024 values decodes (the
// known ones read, the rest ignored); 1025 is refused.
func TestLimitStatsCount(t *testing.T) {
	for _, n := range []int{0, 1, maxStats - 1, maxStats, maxStats + 1} {
		b := make([]byte, wire.HeaderSize, wire.HeaderSize+8+8*n)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		b = binary.LittleEndian.AppendUint32(b, 0)
		for i := range n {
			b = binary.LittleEndian.AppendUint64(b, uint64(i+1))
		}
		wire.Header{Size: uint32(len(b)), Type: wire.TypeStats.Answer(), ID: 1, Epoch: 2}.Put(b)
		var a wire.Answer
		err := (&wire.Decoder{}).DecodeAnswer(b, &a)
		if n > maxStats {
			refused(t, fmt.Sprintf("stats of %d values", n), err, wire.ErrBadFrame, "stats count")
			continue
		}
		want := uint64(0)
		if n > 0 {
			want = 1
		}
		if err != nil || a.Stats.Objects != want {
			t.Errorf("stats of %d values: objects %d, %v", n, a.Stats.Objects, err)
		}
	}
}

// TestPrefixBound: reserve_read_prefix's prefix may equal the results'
// count, not pass it.
func TestPrefixBound(t *testing.T) {
	var e wire.Encoder
	for _, n := range []int{0, 1, 3} {
		for _, prefix := range []int{n - 1, n, n + 1} {
			if prefix < 0 {
				continue
			}
			b, _ := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypeReserveReadPrefix.Answer(), ID: 1, Results: make([]wire.Result, n)})
			binary.LittleEndian.PutUint32(b[wire.HeaderSize+4:], uint32(prefix))
			var a wire.Answer
			err := (&wire.Decoder{}).DecodeAnswer(b, &a)
			if prefix > n {
				refused(t, fmt.Sprintf("prefix %d of %d", prefix, n), err, wire.ErrBadFrame, "prefix")
			} else if err != nil || int(a.Prefix) != prefix {
				t.Errorf("prefix %d of %d: %v", prefix, n, err)
			}
		}
	}
}
