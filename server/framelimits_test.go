//go:build linux

package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// The daemon at every limit of PROTOCOL.md's Limits table: a request at
// the limit, and just under it, is carried out; one just over it is
// answered with its code and closed (a bound of the frame) or refused
// with INVALID_ARGUMENT (a bound of l1), and the daemon goes on serving
// everyone else.

// touchOfSize is a touch whose frame is exactly size bytes: keys of empty
// model and salt (a table of one empty string) and hashes of up to
// MaxStringLen bytes.
func touchOfSize(size int, epoch uint64) *wire.Request {
	const fixed = wire.HeaderSize + 16 + 8 + 2 // header, parameters, keys block head, the table
	rest := size - fixed
	var ks []l1.ObjectKey
	for rest > 0 {
		hl := min(rest-16, wire.MaxStringLen)
		if left := rest - 16 - hl; left > 0 && left < 16 {
			hl -= 16
		}
		ks = append(ks, l1.ObjectKey{ChunkHash: fmt.Sprintf("%08d", len(ks)) + strings.Repeat("h", hl-8)})
		rest -= 16 + hl
	}
	return &wire.Request{Type: wire.TypeTouch, ID: 3, Epoch: epoch, Keys: ks}
}

// limitsDaemon starts a daemon with a bystander client that holds 2 write
// reservations, which every refusal must leave alone.
func limitsDaemon(t *testing.T) (*server.Server, func()) {
	// Read locks up to MaxKeys a call: a lookup is counted against the
	// connection's read-lock limit at its full length (quota.go).
	s := start(t, server.Config{PoolSize: 256 << 20, ConnReadLocks: wire.MaxKeys})
	by := dial(t, s)
	bk := keys("bystander", 2)
	bres, err := by.ReserveWrite(bk, nil, 4096, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	return s, func() {
		t.Helper()
		if err := by.Ping(); err != nil {
			t.Fatalf("the bystander: %v", err)
		}
		if st := s.Stats(); st.WriteLocked != 2 {
			t.Fatalf("%d write-locked; the bystander's 2 only", st.WriteLocked)
		}
		allOK(t, "the bystander finishes")(by.FinishWrite(bk, leasesOf(bres)))
		check(t, s)
	}
}

// refusedAndClosed sends b on a fresh connection that holds a write
// reservation, and checks the answer's code, that the connection is closed
// and that its reservation was released.
func refusedAndClosed(t *testing.T, s *server.Server, what string, b func(r *rawConn) []byte, code wire.Code) {
	t.Helper()
	r := raw(t, s, true)
	r.send(r.frame(wire.Request{Type: wire.TypeReserveWrite, ID: 2, Epoch: r.epoch, Size: 4096, Keys: keys("victim", 1)}))
	if a := r.answer(); a.Code != wire.CodeOK || a.Results[0].Status != wire.StatusOK {
		t.Fatalf("%s: reserve: %+v", what, a)
	}
	closed := s.Stats().ConnsClosed
	r.send(b(r))
	a := r.answer()
	if a.Code != code || a.Message == "" {
		t.Fatalf("%s: answered %v %q, want %v and a message", what, a.Code, a.Message, code)
	}
	t.Logf("%s: %v: %s", what, a.Code, a.Message)
	r.closed()
	waitClosed(t, s, closed+1)
	// The count above may have been another connection's close, one the
	// caller made just before this: wait for this one's release itself.
	deadline := time.Now().Add(5 * time.Second)
	for st := s.Stats(); st.WriteLocked != 2; st = s.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d write-locked 5 s after the refusal; the bystander's 2 only", what, st.WriteLocked)
		}
		time.Sleep(time.Millisecond)
	}
}

// carriedOut sends q on r and checks the answer is OK, and that r still
// answers a ping.
func carriedOut(t *testing.T, r *rawConn, what string, b []byte) wire.Answer {
	t.Helper()
	_ = r.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	r.send(b)
	a := r.answer()
	if a.Code != wire.CodeOK {
		t.Fatalf("%s: %v %q", what, a.Code, a.Message)
	}
	r.send(r.frame(wire.Request{Type: wire.TypePing, ID: 99, Epoch: r.epoch}))
	if p := r.answer(); p.Code != wire.CodeOK || p.ID != 99 {
		t.Fatalf("%s: the ping after: %+v", what, p)
	}
	return a
}

// TestMaxFrameAtTheDaemon: a frame of exactly MaxFrame bytes is carried
// out, and so is one a byte shorter; MaxFrame+1 is TOO_LARGE.
func TestMaxFrameAtTheDaemon(t *testing.T) {
	s, after := limitsDaemon(t)
	r := raw(t, s, true)
	var e wire.Encoder
	for _, size := range []int{wire.MaxFrame - 1, wire.MaxFrame} {
		for _, ty := range []wire.Type{wire.TypeTouch, wire.TypeReserveRead} {
			q := touchOfSize(size, r.epoch)
			q.Type = ty
			if ty == wire.TypeReserveRead {
				q.Locks = 1
			}
			b, err := e.AppendRequest(nil, q)
			if err != nil || len(b) != size {
				t.Fatalf("a %v of %d bytes: %d, %v", ty, size, len(b), err)
			}
			a := carriedOut(t, r, fmt.Sprintf("a %v of %d bytes", ty, size), b)
			if ty == wire.TypeReserveRead && (len(a.Results) != len(q.Keys) || a.Results[0].Status != wire.StatusKeyNotExist) {
				t.Fatalf("a %v of %d bytes: %d results for %d keys", ty, size, len(a.Results), len(q.Keys))
			}
		}
	}
	refusedAndClosed(t, s, "MaxFrame+1", func(r *rawConn) []byte {
		b, _ := e.AppendRequest(nil, touchOfSize(wire.MaxFrame, r.epoch))
		binary.LittleEndian.PutUint32(b, wire.MaxFrame+1)
		return b[:wire.HeaderSize+16] // the daemon judges the header alone
	}, wire.CodeTooLarge)
	after()
}

// TestKeyLimitsAtTheDaemon: MaxKeys keys, MaxStrings models and salts,
// MaxStringLen bytes in a hash, a model and a salt, and the last string
// index; one past each is BAD_FRAME.
func TestKeyLimitsAtTheDaemon(t *testing.T) {
	s, after := limitsDaemon(t)
	c := dial(t, s)
	for _, n := range []int{wire.MaxKeys - 1, wire.MaxKeys} {
		ks := make([]l1.ObjectKey, n)
		for i := range ks {
			ks[i].ChunkHash = fmt.Sprint(i)
		}
		res, err := c.ReserveRead(ks, 1)
		if err != nil || len(res) != n || res[n-1].Status != wire.StatusKeyNotExist {
			t.Fatalf("%d keys: %d results, %v", n, len(res), err)
		}
	}
	for _, n := range []int{wire.MaxStrings - 1, wire.MaxStrings} {
		ks := make([]l1.ObjectKey, n) // one new string per key
		for i := range ks {
			ks[i] = l1.ObjectKey{ChunkHash: "h", Model: fmt.Sprint(i), CacheSalt: fmt.Sprint(i)}
		}
		if err := c.Touch(ks); err != nil {
			t.Fatalf("%d strings: %v", n, err)
		}
	}
	for _, n := range []int{wire.MaxStringLen - 1, wire.MaxStringLen} {
		k := []l1.ObjectKey{{ChunkHash: strings.Repeat("h", n), Model: strings.Repeat("m", n), CacheSalt: strings.Repeat("s", n)}}
		res, err := c.ReserveWrite(k, nil, 4096, l1.ModeAll)
		if err != nil || res[0].Status != wire.StatusOK {
			t.Fatalf("strings of %d bytes: %v %v", n, res, err)
		}
		allOK(t, "finish")(c.FinishWrite(k, leasesOf(res)))
		rr, err := c.ReserveRead(k, 1)
		if err != nil || rr[0].Status != wire.StatusOK || rr[0].Block != res[0].Block {
			t.Fatalf("strings of %d bytes, read back: %v %v", n, rr, err)
		}
		allOK(t, "finish_read")(c.FinishRead(k, leasesOf(rr), 1))
		allOK(t, "delete")(c.Delete(k, false))
	}

	// One past each, by hand: a touch whose keys block is then edited.
	var e wire.Encoder
	touch := func(r *rawConn, ks []l1.ObjectKey) []byte {
		b, err := e.AppendRequest(nil, &wire.Request{Type: wire.TypeTouch, ID: 5, Epoch: r.epoch, Keys: ks})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const block = wire.HeaderSize + 16 // where the keys block starts
	refusedAndClosed(t, s, "MaxKeys+1 keys", func(r *rawConn) []byte {
		b := touch(r, make([]l1.ObjectKey, wire.MaxKeys))
		b = append(b, make([]byte, 16)...) // one more key record: empty hash, indexes 0
		binary.LittleEndian.PutUint32(b[block:], wire.MaxKeys+1)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}, wire.CodeBadFrame)
	refusedAndClosed(t, s, "MaxStrings+1 strings", func(r *rawConn) []byte {
		b := touch(r, []l1.ObjectKey{{ChunkHash: "h"}}) // table [""]
		extra := make([]byte, 2*wire.MaxStrings)        // MaxStrings more empty strings
		b = append(b[:block+10:block+10], append(extra, b[block+10:]...)...)
		binary.LittleEndian.PutUint16(b[block+4:], wire.MaxStrings+1)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}, wire.CodeBadFrame)
	refusedAndClosed(t, s, "a hash of MaxStringLen+1 bytes", func(r *rawConn) []byte {
		b := touch(r, []l1.ObjectKey{{ChunkHash: strings.Repeat("h", wire.MaxStringLen)}})
		b = append(b, 'h')
		binary.LittleEndian.PutUint16(b[block+10:], wire.MaxStringLen+1)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}, wire.CodeBadFrame)
	refusedAndClosed(t, s, "a model of MaxStringLen+1 bytes", func(r *rawConn) []byte {
		m := strings.Repeat("m", wire.MaxStringLen)
		b := touch(r, []l1.ObjectKey{{Model: m, CacheSalt: m}}) // table [m]
		b = append(b[:block+10+len(m):block+10+len(m)], append([]byte{'m'}, b[block+10+len(m):]...)...)
		binary.LittleEndian.PutUint16(b[block+8:], wire.MaxStringLen+1)
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		return b
	}, wire.CodeBadFrame)
	after()
}

// TestStringIndexAtTheDaemon: a key naming the table's last string is
// served; one naming the index equal to the table's length, as model or
// salt, of the first key or a later one, is BAD_FRAME and closes only its
// connection: the daemon does not index past the table.
func TestStringIndexAtTheDaemon(t *testing.T) {
	s, after := limitsDaemon(t)
	var e wire.Encoder
	// Two keys: models "a" and "b", salt "" for both: the table is
	// ["a", "", "b"]; key i's record is at rec(i).
	ks := []l1.ObjectKey{{ChunkHash: "k0", Model: "a"}, {ChunkHash: "k1", Model: "b"}}
	const table = wire.HeaderSize + 16 + 8 + (2 + 1) + 2 + (2 + 1)
	rec := func(i int) int { return table + i*(16+2) }
	frame := func(r *rawConn, ty wire.Type, key, field int, idx uint16) []byte {
		q := wire.Request{Type: ty, ID: 5, Epoch: r.epoch, Keys: ks}
		switch ty {
		case wire.TypeReserveWrite:
			q.Size = 4096
		case wire.TypeReserveRead:
			q.Locks = 1
		}
		b, err := e.AppendRequest(nil, &q)
		if err != nil {
			t.Fatal(err)
		}
		if got := binary.LittleEndian.Uint16(b[rec(1)+2:]); got != 2 {
			t.Fatalf("key 1's model index is %d, want 2: the layout moved", got)
		}
		binary.LittleEndian.PutUint16(b[rec(key)+field:], idx)
		return b
	}
	for _, ty := range []wire.Type{wire.TypeReserveWrite, wire.TypeReserveRead, wire.TypeTouch} {
		r := raw(t, s, true)
		a := carriedOut(t, r, fmt.Sprintf("%v naming string 2 of 3", ty), frame(r, ty, 0, 4, 2))
		if ty == wire.TypeReserveWrite {
			// Key 0 became (k0, "a", salt "b"): abort it by that key.
			r.send(r.frame(wire.Request{Type: wire.TypeAbortWrite, ID: 6, Epoch: r.epoch,
				Keys:   []l1.ObjectKey{{ChunkHash: "k0", Model: "a", CacheSalt: "b"}, ks[1]},
				Leases: []l1.Lease{a.Results[0].Lease, a.Results[1].Lease}}))
			if ab := r.answer(); ab.Code != wire.CodeOK || ab.Statuses[0] != wire.StatusOK || ab.Statuses[1] != wire.StatusOK {
				t.Fatalf("abort: %+v", ab)
			}
		}
		r.c.Close()
		for _, key := range []int{0, 1} {
			for _, field := range []int{2, 4} { // model, salt
				for _, idx := range []uint16{3, 4, 1<<16 - 1} {
					what := fmt.Sprintf("%v, key %d's index at +%d = %d of a table of 3", ty, key, field, idx)
					refusedAndClosed(t, s, what, func(r *rawConn) []byte { return frame(r, ty, key, field, idx) }, wire.CodeBadFrame)
				}
			}
		}
	}
	after()
}

// TestLocksAtTheDaemon: read locks per key per call from 1 to 128; 0 and
// 129 are INVALID_ARGUMENT, change nothing and keep the connection.
func TestLocksAtTheDaemon(t *testing.T) {
	s, after := limitsDaemon(t)
	c := dial(t, s)
	k := keys("locks", 1)
	res, err := c.ReserveWrite(k, nil, 4096, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "finish")(c.FinishWrite(k, leasesOf(res)))
	for _, n := range []int{1, 2, l1.MaxReadLocks - 1, l1.MaxReadLocks} {
		rr, err := c.ReserveRead(k, n)
		if err != nil || rr[0].Status != wire.StatusOK {
			t.Fatalf("%d locks: %v %v", n, rr, err)
		}
		allOK(t, fmt.Sprintf("release %d", n))(c.FinishRead(k, leasesOf(rr), n))
	}
	rr, err := c.ReserveRead(k, l1.MaxReadLocks)
	if err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	for _, n := range []int{0, l1.MaxReadLocks + 1} {
		if _, err := c.ReserveRead(k, n); !errors.Is(err, wire.ErrInvalidArgument) {
			t.Errorf("reserve_read of %d locks: %v", n, err)
		}
		if _, err := c.FinishRead(k, leasesOf(rr), n); !errors.Is(err, wire.ErrInvalidArgument) {
			t.Errorf("finish_read of %d locks: %v", n, err)
		}
		if _, err := c.FinishWriteAndReserveRead(k, leasesOf(res), n); !errors.Is(err, wire.ErrInvalidArgument) {
			t.Errorf("finish_write_and_reserve_read of %d locks: %v", n, err)
		}
	}
	if st := s.Stats(); st.Objects != before.Objects || st.ConnsClosed != before.ConnsClosed {
		t.Fatalf("the refusals changed the daemon: %+v, then %+v", before, st)
	}
	allOK(t, "release 128")(c.FinishRead(k, leasesOf(rr), l1.MaxReadLocks))
	allOK(t, "delete")(c.Delete(k, false))
	after()
}
