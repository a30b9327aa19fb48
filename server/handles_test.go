//go:build linux

package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// call sends q on r (its epoch set) and returns the answer, refusing a
// code other than OK.
func (r *rawConn) call(q wire.Request) wire.Answer {
	r.t.Helper()
	q.Epoch = r.epoch
	r.send(r.frame(q))
	a := r.answer()
	if a.Code != wire.CodeOK {
		r.t.Fatalf("%v: %v %s", q.Type, a.Code, a.Message)
	}
	return a
}

// granted checks that every result is OK with a handle, and returns the
// handles and leases.
func granted(t testing.TB, what string, a wire.Answer) ([]uint32, []l1.Lease) {
	t.Helper()
	var hs []uint32
	var ls []l1.Lease
	for i, r := range a.Results {
		if r.Status != wire.StatusOK || r.Handle == 0 {
			t.Fatalf("%s: result %d is %v with handle %d, want OK with a handle", what, i, r.Status, r.Handle)
		}
		hs, ls = append(hs, r.Handle), append(ls, r.Lease)
	}
	return hs, ls
}

// wantStatuses checks an answer's statuses.
func wantStatuses(t testing.TB, what string, a wire.Answer, want ...wire.Status) {
	t.Helper()
	if !slices.Equal(a.Statuses, want) {
		t.Fatalf("%s: %v, want %v", what, a.Statuses, want)
	}
}

func reserveW(r *rawConn, ks []l1.ObjectKey) wire.Answer {
	return r.call(wire.Request{Type: wire.TypeReserveWrite, Size: 4096, Keys: ks})
}

func byHandle(t wire.Type, hs []uint32, ls []l1.Lease) wire.Request {
	return wire.Request{Type: t, Flags: wire.FlagHandles, Handles: hs, Leases: ls}
}

// TestHandlesHello: a version 2 hello gets version 2 and the versions the
// daemon speaks; a version 1 hello gets version 1 and no versions (its
// decoder, which refuses a nonzero reserved field, took the answer).
func TestHandlesHello(t *testing.T) {
	s := start(t, server.Config{})
	if h := rawVersion(t, s, wire.Version2).hello; h.Version != wire.Version2 || h.Versions != wire.Versions {
		t.Fatalf("version 2 hello answered %+v", h)
	}
	if h := rawVersion(t, s, wire.Version).hello; h.Version != wire.Version || h.Versions != 0 {
		t.Fatalf("version 1 hello answered %+v", h)
	}
}

// TestHandlesCycle: a write and a read cycle by handle, and every handle
// stale once its hold is gone (finished, aborted, released).
func TestHandlesCycle(t *testing.T) {
	s := start(t, server.Config{})
	r := rawVersion(t, s, wire.Version2)
	ks := keys("cycle", 3)
	hs, ls := granted(t, "reserve_write", reserveW(r, ks))
	if hs[0] == hs[1] || hs[1] == hs[2] || hs[0] == hs[2] {
		t.Fatalf("handles %v are not distinct", hs)
	}
	check(t, s)
	wantStatuses(t, "finish_write by handle", r.call(byHandle(wire.TypeFinishWrite, hs[:2], ls[:2])), wire.StatusOK, wire.StatusOK)
	wantStatuses(t, "abort_write by handle", r.call(byHandle(wire.TypeAbortWrite, hs[2:], ls[2:])), wire.StatusOK)
	for _, typ := range []wire.Type{wire.TypeFinishWrite, wire.TypeAbortWrite} {
		wantStatuses(t, typ.String()+" of spent handles", r.call(byHandle(typ, hs, ls)), wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner)
	}
	if _, ok := s.Manager().State(ks[2]); ok {
		t.Fatal("the aborted key exists")
	}
	check(t, s)
	q := wire.Request{Type: wire.TypeReserveRead, Locks: 2, Keys: ks[:2]}
	rh, rl := granted(t, "reserve_read", r.call(q))
	q.Locks = 1
	rh2, _ := granted(t, "reserve_read again", r.call(q))
	if !slices.Equal(rh, rh2) {
		t.Fatalf("a key read again under its lease got handles %v, then %v", rh, rh2)
	}
	fr := byHandle(wire.TypeFinishRead, rh, rl)
	fr.Locks = 2
	wantStatuses(t, "finish_read of 2 by handle", r.call(fr), wire.StatusOK, wire.StatusOK)
	fr.Locks = 2
	wantStatuses(t, "finish_read of 2 more", r.call(fr), wire.StatusOverRelease, wire.StatusOverRelease)
	fr.Locks = 1
	wantStatuses(t, "finish_read of the last", r.call(fr), wire.StatusOK, wire.StatusOK)
	wantStatuses(t, "finish_read of freed handles", r.call(fr), wire.StatusNotOwner, wire.StatusNotOwner)
	for _, k := range ks[:2] {
		if st, ok := s.Manager().State(k); !ok || st.ReadLocks != 0 || st.WriteLocked {
			t.Fatalf("%v: %+v after the cycle", k, st)
		}
	}
	check(t, s)
}

// TestHandlesFinishWriteAndReserveRead: finish_write_and_reserve_read by
// handle answers the read locks' handles, the write handles are gone, and
// a handle that names nothing is NOT_OWNER with the zero result.
func TestHandlesFinishWriteAndReserveRead(t *testing.T) {
	s := start(t, server.Config{})
	r := rawVersion(t, s, wire.Version2)
	ks := keys("fwrr", 2)
	hs, ls := granted(t, "reserve_write", reserveW(r, ks))
	q := byHandle(wire.TypeFinishWriteAndReserveRead, []uint32{hs[0], 0, hs[1]}, []l1.Lease{ls[0], ls[0], ls[1]})
	q.Locks = 1
	a := r.call(q)
	if a.Results[1] != (wire.Result{Status: wire.StatusNotOwner}) {
		t.Fatalf("handle 0: %+v, want NOT_OWNER and nothing else", a.Results[1])
	}
	a.Results = slices.Delete(a.Results, 1, 2)
	rh, rl := granted(t, "finish_write_and_reserve_read", a)
	wantStatuses(t, "finish_write of the spent write handles", r.call(byHandle(wire.TypeFinishWrite, hs, ls)), wire.StatusNotOwner, wire.StatusNotOwner)
	check(t, s)
	fr := byHandle(wire.TypeFinishRead, rh, rl)
	fr.Locks = 1
	wantStatuses(t, "finish_read by the read handles", r.call(fr), wire.StatusOK, wire.StatusOK)
	check(t, s)
}

// TestHandlesOtherConnection: another connection's handles, with their
// leases, name nothing on a connection, nor does a handle number it holds
// itself under another lease; the owner's reservations stand.
func TestHandlesOtherConnection(t *testing.T) {
	s := start(t, server.Config{})
	a, b := rawVersion(t, s, wire.Version2), rawVersion(t, s, wire.Version2)
	ka, kb := keys("conn-a", 2), keys("conn-b", 2)
	ah, al := granted(t, "A reserves", reserveW(a, ka))
	bh, bl := granted(t, "B reserves", reserveW(b, kb))
	if !slices.Equal(ah, bh) {
		t.Logf("A's handles %v, B's %v", ah, bh) // the same numbers is the usual case, and the test's point
	}
	for _, typ := range []wire.Type{wire.TypeFinishWrite, wire.TypeAbortWrite} {
		wantStatuses(t, "B "+typ.String()+" with A's handles and leases", b.call(byHandle(typ, ah, al)), wire.StatusNotOwner, wire.StatusNotOwner)
	}
	q := byHandle(wire.TypeDelete, ah, al)
	q.Flags |= wire.FlagForce
	wantStatuses(t, "B deletes by A's handles", b.call(q), wire.StatusNotOwner, wire.StatusNotOwner)
	for _, k := range ka {
		if st, ok := s.Manager().State(k); !ok || !st.WriteLocked {
			t.Fatalf("%v: %+v after B's attempts; A's reservation must stand", k, st)
		}
	}
	check(t, s)
	wantStatuses(t, "A finishes its own", a.call(byHandle(wire.TypeFinishWrite, ah, al)), wire.StatusOK, wire.StatusOK)
	wantStatuses(t, "B finishes its own", b.call(byHandle(wire.TypeFinishWrite, bh, bl)), wire.StatusOK, wire.StatusOK)
	check(t, s)
}

// TestHandlesAfterForcedDelete: a key another connection deletes with
// force keeps its holder's record and handle until the holder lets go, as
// by key (WRITE_DELETED, then OK for a read); then the handle is stale.
func TestHandlesAfterForcedDelete(t *testing.T) {
	s := start(t, server.Config{})
	a, b := rawVersion(t, s, wire.Version2), rawVersion(t, s, wire.Version2)
	ks := keys("forced", 2)
	hs, ls := granted(t, "A reserves", reserveW(a, ks))
	wantStatuses(t, "A finishes the second", a.call(byHandle(wire.TypeFinishWrite, hs[1:], ls[1:])), wire.StatusOK)
	rh, rl := granted(t, "A reads the second", a.call(wire.Request{Type: wire.TypeReserveRead, Locks: 1, Keys: ks[1:]}))
	wantStatuses(t, "B deletes both with force", b.call(wire.Request{Type: wire.TypeDelete, Flags: wire.FlagForce, Keys: ks}), wire.StatusOK, wire.StatusOK)
	check(t, s)
	wantStatuses(t, "A finishes the deleted write", a.call(byHandle(wire.TypeFinishWrite, hs[:1], ls[:1])), wire.StatusWriteDeleted)
	fr := byHandle(wire.TypeFinishRead, rh, rl)
	fr.Locks = 1
	wantStatuses(t, "A releases the deleted read", a.call(fr), wire.StatusOK)
	wantStatuses(t, "A finishes again", a.call(byHandle(wire.TypeFinishWrite, hs[:1], ls[:1])), wire.StatusNotOwner)
	wantStatuses(t, "A releases again", a.call(fr), wire.StatusNotOwner)
	if st := s.Manager().Stats(); st.Held != 0 {
		t.Fatalf("%d bytes held after every holder let go", st.Held)
	}
	check(t, s)
}

// handleReuse frees a handle and has it handed out again to a new hold:
// the old lease with it must be NOT_OWNER and leave the new hold as it
// is. It is the body of TestHandlesReused and of its bite.
func handleReuse(t testing.TB, s *server.Server) error {
	r := rawVersion(t, s, wire.Version2)
	k1, k2 := keys("reuse-1", 1), keys("reuse-2", 1)
	h1, l1s := granted(t, "reserve k1", reserveW(r, k1))
	wantStatuses(t, "finish k1", r.call(byHandle(wire.TypeFinishWrite, h1, l1s)), wire.StatusOK)
	h2, l2s := granted(t, "reserve k2", reserveW(r, k2))
	if h2[0] != h1[0] {
		return fmt.Errorf("the freed handle %d was not handed out again (got %d): the test needs it", h1[0], h2[0])
	}
	a := r.call(byHandle(wire.TypeFinishWrite, h1, l1s))
	if !slices.Equal(a.Statuses, []wire.Status{wire.StatusNotOwner}) {
		return fmt.Errorf("finish_write by the reused handle %d with the old lease %d: %v, want NOT_OWNER", h1[0], l1s[0], a.Statuses)
	}
	if st, ok := s.Manager().State(k2[0]); !ok || !st.WriteLocked {
		return fmt.Errorf("k2 after the stale call: %+v, want its write reservation", st)
	}
	a = r.call(byHandle(wire.TypeAbortWrite, h2, l2s))
	if !slices.Equal(a.Statuses, []wire.Status{wire.StatusOK}) {
		return fmt.Errorf("abort_write of k2 by its handle and lease: %v", a.Statuses)
	}
	return nil
}

// TestHandlesReused: a freed handle handed out again names the new hold
// only with the new lease.
func TestHandlesReused(t *testing.T) {
	s := start(t, server.Config{})
	if err := handleReuse(t, s); err != nil {
		t.Fatal(err)
	}
	check(t, s)
}

// TestHandlesReusedBites: a daemon that resolves a handle to whatever
// hold it names now, without checking the lease presented, is caught.
func TestHandlesReusedBites(t *testing.T) {
	s := start(t, server.Config{})
	server.ResolveHandlesAnyLease(s)
	err := handleReuse(t, s)
	if err == nil {
		t.Fatal("a daemon that ignores the lease presented with a handle passed")
	}
	t.Logf("caught: %v", err)
}

// TestHandlesExtremes: handle 0, 2³²−1, a handle never handed out, a
// read hold's handle to a write call and a write hold's to finish_read, a
// lease off by one: each is NOT_OWNER and changes nothing, in every call
// by handle; an empty call by handle answers nothing.
func TestHandlesExtremes(t *testing.T) {
	s := start(t, server.Config{})
	r := rawVersion(t, s, wire.Version2)
	ks := keys("extreme", 2)
	wh, wl := granted(t, "reserve k0", reserveW(r, ks[:1]))
	granted(t, "reserve k1", reserveW(r, ks[1:]))
	wantStatuses(t, "finish k1 by key", r.call(wire.Request{Type: wire.TypeFinishWrite, Keys: ks[1:], Leases: []l1.Lease{wl[0] + 1}}), wire.StatusOK)
	rh, rl := granted(t, "read k1", r.call(wire.Request{Type: wire.TypeReserveRead, Locks: 1, Keys: ks[1:]}))
	before := s.Manager().Snapshot()
	bad := []uint32{0, 0xffffffff, 1000, rh[0], wh[0]}
	badL := []l1.Lease{wl[0], wl[0], wl[0], rl[0], wl[0] + 1}
	for _, typ := range []wire.Type{wire.TypeFinishWrite, wire.TypeAbortWrite, wire.TypeDelete} {
		q := byHandle(typ, bad, badL)
		if typ == wire.TypeDelete {
			bad2, badL2 := []uint32{0, 0xffffffff, 1000, wh[0]}, []l1.Lease{wl[0], wl[0], wl[0], wl[0] + 1}
			q = byHandle(typ, bad2, badL2)
			q.Flags |= wire.FlagForce
			wantStatuses(t, "delete by bad handles", r.call(q), wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner)
			continue
		}
		wantStatuses(t, typ.String()+" by bad handles", r.call(q), wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner)
	}
	fr := byHandle(wire.TypeFinishRead, []uint32{0, 0xffffffff, wh[0], rh[0]}, []l1.Lease{rl[0], rl[0], wl[0], rl[0] + 1})
	fr.Locks = 1
	wantStatuses(t, "finish_read by bad handles", r.call(fr), wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner)
	fw := byHandle(wire.TypeFinishWriteAndReserveRead, bad, badL)
	fw.Locks = 1
	for i, res := range r.call(fw).Results {
		if res != (wire.Result{Status: wire.StatusNotOwner}) {
			t.Fatalf("finish_write_and_reserve_read by bad handle %d: %+v", bad[i], res)
		}
	}
	empty := byHandle(wire.TypeFinishRead, nil, nil)
	empty.Locks = 1
	if a := r.call(empty); len(a.Statuses) != 0 {
		t.Fatalf("an empty call by handle: %v", a.Statuses)
	}
	if after := s.Manager().Snapshot(); !slices.EqualFunc(before, after, func(x, y l1.Entry[l1.ObjectKey]) bool {
		return x.Key == y.Key && x.WriteLocked == y.WriteLocked && x.ReadLocks == y.ReadLocks && x.Block == y.Block
	}) {
		t.Fatalf("bad handles changed the objects:\n%+v\n%+v", before, after)
	}
	check(t, s)
	// The good ones still work, and a delete by handle deletes.
	q := byHandle(wire.TypeDelete, wh, wl)
	q.Flags |= wire.FlagForce
	wantStatuses(t, "delete k0 by its handle", r.call(q), wire.StatusOK)
	if _, ok := s.Manager().State(ks[0]); ok {
		t.Fatal("k0 after its delete by handle")
	}
	wantStatuses(t, "abort the deleted k0", r.call(byHandle(wire.TypeAbortWrite, wh, wl)), wire.StatusOK)
	fr = byHandle(wire.TypeFinishRead, rh, rl)
	fr.Locks = 1
	wantStatuses(t, "release k1", r.call(fr), wire.StatusOK)
	check(t, s)
}

// TestHandlesVersion1AndVersion2: a version 1 and a version 2 connection
// on one daemon at once: the version 1 one never gets a handle (its
// decoder refuses one) and a call by handle from it is BAD_FRAME and
// closes it, releasing what it held, while the version 2 one goes on.
func TestHandlesVersion1AndVersion2(t *testing.T) {
	s := start(t, server.Config{})
	v1, v2 := rawVersion(t, s, wire.Version), rawVersion(t, s, wire.Version2)
	ks := keys("both", 4)
	a1 := reserveW(v1, ks[:2])
	for _, res := range a1.Results {
		if res.Status != wire.StatusOK || res.Handle != 0 {
			t.Fatalf("version 1 reserve: %+v", res)
		}
	}
	hs, ls := granted(t, "version 2 reserve", reserveW(v2, ks[2:]))
	wantStatuses(t, "version 1 finishes by key", v1.call(wire.Request{Type: wire.TypeFinishWrite, Keys: ks[:1], Leases: []l1.Lease{a1.Results[0].Lease}}), wire.StatusOK)
	wantStatuses(t, "version 2 finishes by handle", v2.call(byHandle(wire.TypeFinishWrite, hs[:1], ls[:1])), wire.StatusOK)
	wantStatuses(t, "version 2 finishes by key", v2.call(wire.Request{Type: wire.TypeFinishWrite, Keys: ks[3:], Leases: ls[1:]}), wire.StatusOK)
	q := byHandle(wire.TypeAbortWrite, []uint32{1}, []l1.Lease{a1.Results[1].Lease})
	q.Epoch = v1.epoch
	v1.send(v1.frame(q))
	if a := v1.answer(); a.Code != wire.CodeBadFrame {
		t.Fatalf("a call by handle on version 1: %v %s, want BAD_FRAME", a.Code, a.Message)
	}
	v1.closed()
	waitFor(t, "the version 1 connection's release", func() bool {
		_, ok := s.Manager().State(ks[1])
		return !ok
	})
	rh, rl := granted(t, "version 2 reads", v2.call(wire.Request{Type: wire.TypeReserveRead, Locks: 1, Keys: []l1.ObjectKey{ks[0], ks[2], ks[3]}}))
	fr := byHandle(wire.TypeFinishRead, rh, rl)
	fr.Locks = 1
	wantStatuses(t, "version 2 releases", v2.call(fr), wire.StatusOK, wire.StatusOK, wire.StatusOK)
	check(t, s)
}

// waitFor polls cond every millisecond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHandlesBadAfterGood: a bad handle in the slot where the last call
// by handle resolved a live hold is NOT_OWNER, though that slot's key and
// the lease presented name the hold: the daemon refuses the handle, it
// does not check whatever key the slot held.
func TestHandlesBadAfterGood(t *testing.T) {
	s := start(t, server.Config{})
	r := rawVersion(t, s, wire.Version2)
	ks := keys("slot", 1)
	wh, wl := granted(t, "reserve", reserveW(r, ks))
	wantStatuses(t, "delete without force by handle", r.call(byHandle(wire.TypeDelete, wh, wl)), wire.StatusKeyIsLocked)
	wantStatuses(t, "finish_write by handle 0", r.call(byHandle(wire.TypeFinishWrite, []uint32{0}, wl)), wire.StatusNotOwner)
	wantStatuses(t, "finish_write by a handle never handed out", r.call(byHandle(wire.TypeFinishWrite, []uint32{wh[0] + 1}, wl)), wire.StatusNotOwner)
	if st, ok := s.Manager().State(ks[0]); !ok || !st.WriteLocked {
		t.Fatalf("after the bad handles: %+v, want the reservation", st)
	}
	wantStatuses(t, "finish_write", r.call(byHandle(wire.TypeFinishWrite, wh, wl)), wire.StatusOK)
	rh, rl := granted(t, "read", r.call(wire.Request{Type: wire.TypeReserveRead, Locks: 1, Keys: ks}))
	fr := byHandle(wire.TypeFinishRead, rh, rl)
	fr.Locks = 2
	wantStatuses(t, "over-release by handle", r.call(fr), wire.StatusOverRelease)
	fr.Locks, fr.Handles = 1, []uint32{0}
	wantStatuses(t, "finish_read by handle 0", r.call(fr), wire.StatusNotOwner)
	if st, _ := s.Manager().State(ks[0]); st.ReadLocks != 1 {
		t.Fatalf("after the bad handle: %+v, want the read lock", st)
	}
	check(t, s)
}
