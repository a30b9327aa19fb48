//go:build linux

package server_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// bigRead returns a reserve_read of keys with 4096-byte hashes and one
// shorter last key, exactly size bytes long (size ≥ 4200).
func bigRead(t testing.TB, id uint32, epoch uint64, size int) []byte {
	t.Helper()
	var enc wire.Encoder
	hash := strings.Repeat("h", wire.MaxStringLen)
	key := func(i, hl int) l1.ObjectKey {
		return l1.ObjectKey{ChunkHash: (fmt.Sprintf("%08d", i) + hash)[:hl], Model: "m"}
	}
	q := wire.Request{Type: wire.TypeReserveRead, ID: id, Epoch: epoch, Locks: 1, Keys: []l1.ObjectKey{key(0, wire.MaxStringLen)}}
	f, err := enc.AppendRequest(nil, &q)
	if err != nil {
		t.Fatal(err)
	}
	const per = 16 + wire.MaxStringLen // a key: its header and hash
	fixed := len(f) - per
	n := (size - fixed) / per // full keys
	left := size - fixed - n*per
	if left < 16+8 {
		n--
		left += per
	}
	if left-16 > wire.MaxStringLen {
		t.Fatalf("cannot fill %d bytes", size)
	}
	q.Keys = q.Keys[:0]
	for i := range n {
		q.Keys = append(q.Keys, key(i, wire.MaxStringLen))
	}
	q.Keys = append(q.Keys, key(n, left-16))
	if f, err = enc.AppendRequest(nil, &q); err != nil || len(f) != size {
		t.Fatalf("frame of %d bytes, want %d: %v", len(f), size, err)
	}
	return f
}

// TestIdleConnectionKeepsLittle: after one legal frame of exactly
// MaxFrame bytes, and after a 10,000-key batch, an idle connection keeps
// its own small buffers only; the large ones went back to the shared
// pool, within its budget.
func TestIdleConnectionKeepsLittle(t *testing.T) {
	s := start(t, server.Config{})
	r := raw(t, s, true)
	r.send(bigRead(t, 2, r.epoch, wire.MaxFrame))
	a := r.answer()
	if a.Code != wire.CodeOK || len(a.Results) < 4000 {
		t.Fatalf("a MaxFrame frame: %v, %d results", a.Err(), len(a.Results))
	}
	// The answer to a ping on the same connection comes after the frame's
	// buffers went back.
	ping := func(id uint32) {
		t.Helper()
		r.send(r.frame(wire.Request{Type: wire.TypePing, ID: id, Epoch: r.epoch}))
		if a := r.answer(); a.Code != wire.CodeOK {
			t.Fatal(a.Err())
		}
	}
	ping(3)
	const most = 64 << 10
	// Idle for a second, a connection drops the scratch a large request
	// made grow.
	idle := func(what string, want int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); s.ConnectionBufferBytes() > want; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s the idle connections keep %d bytes 10 s later (at most %d)", what, s.ConnectionBufferBytes(), want)
			}
		}
	}
	idle(fmt.Sprintf("after one %d-byte frame", wire.MaxFrame), most)
	c := dial(t, s)
	ks := keys("batch", 10000)
	res, err := c.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "FinishWrite")(c.FinishWrite(ks, leasesOf(res)))
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	idle("after a 10,000-key batch", 2*most)
	used, kept, budget := metric(t, s, "kvalloc_daemon_frame_buffer_bytes"), metric(t, s, "kvalloc_daemon_frame_buffer_kept_bytes"), metric(t, s, "kvalloc_daemon_frame_buffer_budget_bytes")
	if used != kept || kept > budget/4 || metric(t, s, "kvalloc_daemon_frame_buffer_peak_bytes") > budget {
		t.Fatalf("shared buffers: %v used, %v kept, budget %v", used, kept, budget)
	}
	ping(4)
}

// TestBufferBudget: with the budget lent to one MaxFrame request (held at
// the gate), another connection's large request waits the frame timeout
// and is answered BUSY, changing nothing, and its connection goes on; once
// the first is answered, the same request is served.
func TestBufferBudget(t *testing.T) {
	s := start(t, server.Config{BufferBudget: 20 << 20, FrameTimeout: 500 * time.Millisecond})
	a, b := raw(t, s, true), raw(t, s, true)
	release := server.HoldGate(s)
	a.send(bigRead(t, 2, a.epoch, wire.MaxFrame))
	for deadline := time.Now().Add(10 * time.Second); metric(t, s, "kvalloc_daemon_frame_buffer_bytes") < 20<<20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first request never borrowed the budget: %v bytes", metric(t, s, "kvalloc_daemon_frame_buffer_bytes"))
		}
	}
	q := wire.Request{Type: wire.TypeReserveWrite, ID: 5, Epoch: b.epoch, Size: 4096, Keys: keys("busy", 3000)}
	t0 := time.Now()
	b.send(b.frame(q))
	ans := b.answer()
	if ans.Code != wire.CodeBusy || ans.ID != 5 || ans.Type != wire.TypeReserveWrite.Answer() || !strings.Contains(ans.Message, "send the request again") {
		t.Fatalf("a request past the budget: %v (id %d, %v)", ans.Err(), ans.ID, ans.Type)
	}
	if d := time.Since(t0); d < 500*time.Millisecond {
		t.Fatalf("BUSY after %v, before the frame timeout", d)
	}
	// The Go client: an error wrapping wire.ErrBusy, and a usable client.
	gc := dial(t, s)
	if _, err := gc.ReserveRead(keys("busy-go", 3000), 1); !errors.Is(err, wire.ErrBusy) {
		t.Fatalf("the Go client past the budget: %v", err)
	}
	release()
	if err := gc.Ping(); err != nil {
		t.Fatalf("the Go client after BUSY: %v", err)
	}
	if ans := a.answer(); ans.Code != wire.CodeOK {
		t.Fatalf("the held request: %v", ans.Err())
	}
	b.send(b.frame(wire.Request{Type: wire.TypePing, ID: 6, Epoch: b.epoch}))
	if ans := b.answer(); ans.Code != wire.CodeOK || ans.ID != 6 {
		t.Fatalf("ping after BUSY: %v", ans.Err())
	}
	if st := s.Stats(); st.Objects != 0 {
		t.Fatalf("BUSY changed something: %d objects", st.Objects)
	}
	b.send(b.frame(q))
	if ans := b.answer(); ans.Code != wire.CodeOK || len(ans.Results) != 3000 || ans.Results[0].Status != wire.StatusOK {
		t.Fatalf("the same request once the budget is free: %v", ans.Err())
	}
	if got := metric(t, s, "kvalloc_daemon_busy_total"); got != 2 {
		t.Fatalf("busy_total %v", got)
	}
}

// TestBufferWaitEndsAtShutdown: a request waiting for frame buffers is
// answered CLOSED as soon as the daemon shuts down, not at the end of its
// frame timeout.
func TestBufferWaitEndsAtShutdown(t *testing.T) {
	s := start(t, server.Config{BufferBudget: 20 << 20, FrameTimeout: time.Minute})
	a, b := raw(t, s, true), raw(t, s, true)
	release := server.HoldGate(s)
	a.send(bigRead(t, 2, a.epoch, wire.MaxFrame))
	for deadline := time.Now().Add(10 * time.Second); metric(t, s, "kvalloc_daemon_frame_buffer_bytes") < 20<<20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first request never borrowed the budget")
		}
	}
	b.send(b.frame(wire.Request{Type: wire.TypeReserveWrite, ID: 5, Epoch: b.epoch, Size: 4096, Keys: keys("wait", 3000)}))
	for deadline := time.Now().Add(10 * time.Second); server.BufferWaiters(s) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second request never waited for the budget")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	t0 := time.Now()
	if ans := b.answer(); ans.Code != wire.CodeClosed || ans.ID != 5 {
		t.Fatalf("a request waiting for buffers at shutdown: %v (id %d)", ans.Err(), ans.ID)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("CLOSED after %v", d)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
