//go:build linux

package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// versionScript drives two clients of one protocol version through every
// finishing call's cases (owned, another's, spent, under another key's
// lease, repeated, over-released, cut at the read-lock limit, after a
// forced delete, after a disconnect) and returns everything they were
// answered, one line per call, and the daemon's stats at the end.
func versionScript(t *testing.T, version uint32) string {
	s := start(t, server.Config{ConnReadLocks: 10})
	dialV := func() *client.Client {
		c, err := client.Dial(s.SocketPath(), client.Options{Version: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if c.Version() != version {
			t.Fatalf("asked for version %d, speaking %d", version, c.Version())
		}
		return c
	}
	a, b := dialV(), dialV()
	var out strings.Builder
	say := func(what string, v any, err error) {
		fmt.Fprintf(&out, "%s: %v %v\n", what, v, err)
	}
	ks := keys("script", 6)
	w, err := a.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	say("A reserves", w, err)
	wl := leasesOf(w)
	bw, err := b.ReserveWrite(keys("b", 2), nil, 4096, l1.ModeAll)
	say("B reserves", bw, err)
	sts, err := b.FinishWrite(ks[:2], wl[:2])
	say("B finishes A's", sts, err)
	sts, err = a.FinishWrite([]l1.ObjectKey{ks[1], ks[0]}, wl[:2])
	say("A finishes under each other's leases", sts, err)
	sts, err = a.FinishWrite([]l1.ObjectKey{ks[0], ks[0], ks[1]}, []client.Lease{wl[0], wl[0], leasesOf(bw)[0]})
	say("A finishes one twice and B's", sts, err)
	sts, err = a.FinishWrite(ks[:1], wl[:1])
	say("A finishes a spent one", sts, err)
	sts, err = a.AbortWrite(ks[5:], wl[5:])
	say("A aborts", sts, err)
	rr, err := a.FinishWriteAndReserveRead(ks[1:5], wl[1:5], 2)
	say("A publishes and reads, within its 10 read locks", rr, err)
	rr2, err := a.FinishWriteAndReserveRead(ks[1:5], wl[1:5], 1)
	say("A publishes again", rr2, err)
	rl := leasesOf(rr)
	r2, err := a.ReserveRead(ks[:2], 1)
	say("A reads what it holds and one more", r2, err)
	sts, err = a.FinishRead([]l1.ObjectKey{ks[2], ks[1]}, rl[:2], 1)
	say("A releases under each other's leases", sts, err)
	sts, err = a.FinishRead(ks[1:3], rl[:2], 2)
	say("A releases two of 3 and two of 2", sts, err)
	sts, err = a.FinishRead([]l1.ObjectKey{ks[1], ks[1]}, []client.Lease{rl[0], rl[0]}, 1)
	say("A releases one twice", sts, err)
	sts, err = a.FinishRead(ks[1:2], rl[:1], 1)
	say("A releases a spent read", sts, err)
	sts, err = b.FinishRead(ks[2:4], rl[1:3], 1)
	say("B releases A's", sts, err)
	sts, err = a.FinishRead(ks[3:4], rl[2:3], 3)
	say("A over-releases", sts, err)
	sts, err = b.Delete(ks[4:5], true)
	say("B deletes a key A reads, with force", sts, err)
	sts, err = a.FinishRead(ks[4:5], rl[3:4], 3)
	say("A over-releases the deleted", sts, err)
	sts, err = a.FinishRead(ks[4:5], rl[3:4], 2)
	say("A releases the deleted", sts, err)
	sts, err = a.FinishRead(ks[4:5], rl[3:4], 1)
	say("A releases the deleted again", sts, err)
	sts, err = b.FinishWrite(keys("b", 2), leasesOf(bw))
	say("B finishes its own", sts, err)
	sts, err = a.Delete(ks, false)
	say("A deletes", sts, err)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, s, 1)
	st, err := b.Stats()
	fmt.Fprintf(&out, "held %d, objects %d, write locked %d, released %d writes %d reads (%v)\n",
		st.HeldBytes, st.Objects, st.WriteLocked, st.ReleasedWrites, st.ReleasedReadLocks, err)
	check(t, s)
	// Epochs are each daemon's own.
	return strings.ReplaceAll(out.String(), fmt.Sprint(b.Epoch()), "EPOCH")
}

// TestVersionsAnswerAlike: the same calls get the same answers, the same
// leases and blocks and leave the same state, whether the client speaks
// version 1 (keys) or version 2 (handles).
func TestVersionsAnswerAlike(t *testing.T) {
	v1 := versionScript(t, wire.Version)
	v2 := versionScript(t, wire.Version2)
	if v1 != v2 {
		t.Fatalf("version 1 answered\n%s\nversion 2 answered\n%s", v1, v2)
	}
	t.Logf("both versions:\n%s", v1)
}
