//go:build linux

package server_test

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// statuses checks a call's statuses against want.
func statuses(t testing.TB, what string, got []wire.Status, err error, want ...wire.Status) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

// TestNotOwner: a write lease presented on another connection is refused,
// for every finishing call, and the owner's reservation stands; a read
// lease another connection holds is refused too.
func TestNotOwner(t *testing.T) {
	s := start(t, server.Config{})
	a, b := dial(t, s), dial(t, s)
	ks := keys("own", 3)
	res, err := a.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	ls := leasesOf(res)
	sts, err := b.FinishWrite(ks, ls)
	statuses(t, "B finishes A's writes", sts, err, wire.StatusNotOwner, wire.StatusNotOwner, wire.StatusNotOwner)
	sts, err = b.AbortWrite(ks[:1], ls[:1])
	statuses(t, "B aborts A's write", sts, err, wire.StatusNotOwner)
	rr, err := b.FinishWriteAndReserveRead(ks[1:2], ls[1:2], 1)
	if err != nil || rr[0].Status != wire.StatusNotOwner || rr[0].Lease != (client.Lease{}) {
		t.Fatalf("B publishes A's write: %+v, %v", rr, err)
	}
	for _, k := range ks {
		if st, ok := s.Manager().State(k); !ok || !st.WriteLocked {
			t.Fatalf("%v: %+v after B's attempts; A's reservation must stand", k, st)
		}
	}
	check(t, s)
	// A mix: the owned key goes through, the foreign one is refused, in
	// request order.
	other := keys("other", 1)
	ores, _ := b.ReserveWrite(other, nil, 4096, l1.ModeAll)
	sts, err = a.FinishWrite([]l1.ObjectKey{other[0], ks[0]}, []client.Lease{ores[0].Lease, ls[0]})
	statuses(t, "A finishes B's and its own", sts, err, wire.StatusNotOwner, wire.StatusOK)
	// A lease presented with another key is not the connection's either.
	sts, err = a.FinishWrite(ks[1:2], ls[2:3])
	statuses(t, "A finishes a key under another key's lease", sts, err, wire.StatusNotOwner)
	sts, err = a.FinishWrite(ks[1:], ls[1:])
	statuses(t, "A finishes", sts, err, wire.StatusOK, wire.StatusOK)
	// Finished: the lease is spent.
	sts, err = a.FinishWrite(ks[:1], ls[:1])
	statuses(t, "A finishes twice", sts, err, wire.StatusNotOwner)
	// Read leases: B cannot release what A holds.
	rr, err = a.ReserveRead(ks[:1], 1)
	if err != nil || rr[0].Status != wire.StatusOK {
		t.Fatal(rr, err)
	}
	sts, err = b.FinishRead(ks[:1], leasesOf(rr), 1)
	statuses(t, "B releases A's read lock", sts, err, wire.StatusNotOwner)
	if st, _ := s.Manager().State(ks[0]); st.ReadLocks != 1 {
		t.Fatalf("read locks %d after B's release, want A's 1", st.ReadLocks)
	}
	check(t, s)
}

// TestOverRelease: readers of one object share its lease; a reader that
// releases more locks than its connection holds is refused and nothing
// changes, so it cannot release another reader's lock and let the object
// be evicted under it.
func TestOverRelease(t *testing.T) {
	s := start(t, server.Config{})
	a, b := dial(t, s), dial(t, s)
	k := keys("shared", 1)
	res, _ := a.ReserveWrite(k, nil, 4096, l1.ModeAll)
	allOK(t, "finish")(a.FinishWrite(k, leasesOf(res)))
	ra, _ := a.ReserveRead(k, 1)
	rb, _ := b.ReserveRead(k, 2)
	if ra[0].Lease != rb[0].Lease {
		t.Fatalf("readers of one epoch got leases %v and %v", ra[0].Lease, rb[0].Lease)
	}
	sts, err := a.FinishRead(k, leasesOf(ra), 2)
	statuses(t, "A releases 2 of its 1", sts, err, wire.StatusOverRelease)
	// In one call: the first occurrence takes A's one lock, the second
	// finds none left.
	sts, err = a.FinishRead([]l1.ObjectKey{k[0], k[0]}, []client.Lease{ra[0].Lease, ra[0].Lease}, 1)
	statuses(t, "A releases 1 twice in a call", sts, err, wire.StatusOK, wire.StatusNotOwner)
	if st, _ := s.Manager().State(k[0]); st.ReadLocks != 2 {
		t.Fatalf("read locks %d, want B's 2", st.ReadLocks)
	}
	sts, err = b.FinishRead(k, leasesOf(rb), 3)
	statuses(t, "B releases 3 of its 2", sts, err, wire.StatusOverRelease)
	allOK(t, "B releases its 2")(b.FinishRead(k, leasesOf(rb), 2))
	if st, _ := s.Manager().State(k[0]); st.ReadLocks != 0 || !st.Evictable {
		t.Fatalf("%+v after every release", st)
	}
	check(t, s)
}

// TestCloseReleases: a client that closes with writes reserved and read
// locks held leaves nothing locked, and the stats count the release.
func TestCloseReleases(t *testing.T) {
	s := start(t, server.Config{})
	a, b := dial(t, s), dial(t, s)
	ready := keys("ready", 2)
	res, _ := b.ReserveWrite(ready, []bool{false, true}, 4096, l1.ModeAll)
	allOK(t, "finish")(b.FinishWrite(ready, leasesOf(res)))
	ws := keys("pending", 5)
	if _, err := a.ReserveWrite(ws, nil, 1<<20, l1.ModeAll); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReserveRead(ready, 3); err != nil {
		t.Fatal(err)
	}
	rb, _ := b.ReserveRead(ready[:1], 1)
	check(t, s)
	before := s.Stats()
	a.Close()
	waitClosed(t, s, before.ConnsClosed+1)
	check(t, s)
	for _, k := range ws {
		if _, ok := s.Manager().State(k); ok {
			t.Fatalf("%v survived its writer's close", k)
		}
	}
	if st, _ := s.Manager().State(ready[0]); st.ReadLocks != 1 {
		t.Fatalf("%v: %d read locks, want B's 1", ready[0], st.ReadLocks)
	}
	// The temporary object lost its last reader with A: it is gone.
	if _, ok := s.Manager().State(ready[1]); ok {
		t.Fatal("a temporary object outlived its last reader")
	}
	st := s.Stats()
	if st.ReleasedWrites != 5 || st.ReleasedReadLocks != 6 || st.ReleasedBytes != 5<<20+4096 || st.ConnsOpen != 1 {
		t.Fatalf("released %d writes, %d read locks, %d bytes; %d open", st.ReleasedWrites, st.ReleasedReadLocks, st.ReleasedBytes, st.ConnsOpen)
	}
	allOK(t, "B releases")(b.FinishRead(ready[:1], leasesOf(rb), 1))
}

// waitClosed waits until the daemon has counted n connections closed.
func waitClosed(t testing.TB, s *server.Server, n uint64) time.Duration {
	t.Helper()
	start := time.Now()
	for s.Stats().ConnsClosed < n {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d connections closed after 5 s, want %d", s.Stats().ConnsClosed, n)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// TestKilledClientReleases: a client process killed with SIGKILL while
// holding writes and read locks is found dead by the kernel, not a
// heartbeat, and released at once.
func TestKilledClientReleases(t *testing.T) {
	s := start(t, server.Config{})
	c := dial(t, s)
	rs := keys("held-r", 3)
	res, _ := c.ReserveWrite(rs, nil, 4096, l1.ModeAll)
	allOK(t, "finish")(c.FinishWrite(rs, leasesOf(res)))
	cmd, lines := child(t, "holder", s.SocketPath(), nil, "")
	expect(t, lines, "holding")
	if st := s.Stats(); st.WriteLocked != 4 {
		t.Fatalf("%d write-locked, want the child's 4", st.WriteLocked)
	}
	before := s.Stats().ConnsClosed
	killed := time.Now()
	cmd.Process.Signal(syscall.SIGKILL)
	waitClosed(t, s, before+1)
	took := time.Since(killed)
	check(t, s)
	st := s.Stats()
	if st.WriteLocked != 0 || st.Objects != 3 {
		t.Fatalf("after the kill: %+v", st)
	}
	for _, k := range rs {
		if o, _ := s.Manager().State(k); o.ReadLocks != 0 {
			t.Fatalf("%v keeps %d read locks of a dead client", k, o.ReadLocks)
		}
	}
	recs := s.Closes()
	r := recs[len(recs)-1]
	if r.Peer.PID != int32(cmd.Process.Pid) || r.Writes != 4 || r.ReadLocks != 6 {
		t.Fatalf("close record %+v for pid %d", r, cmd.Process.Pid)
	}
	t.Logf("SIGKILL to release: %v (the daemon's release itself: %v)", took, r.Released.Sub(r.Ended))
}

// TestPeerRefused: a process of a uid and gid not on the allowlist is
// refused with a message that names them, and counted; the socket's mode
// lets it connect, so the refusal is SO_PEERCRED's.
func TestPeerRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a child as uid 65534")
	}
	// The child must reach the socket and run the binary as nobody: a
	// directory of its own, open to all (t.TempDir's parent is 0700).
	dir, err := os.MkdirTemp("", "kvalloc-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	bin := filepath.Join(dir, "child.test")
	copyFile(t, exe, bin)
	s := start(t, server.Config{SocketPath: filepath.Join(dir, "kvallocd.sock"), SocketMode: 0o666})
	cmd, lines := child(t, "dialer", s.SocketPath(),
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}, bin)
	line := expect(t, lines, "")
	cmd.Wait()
	if want := "refused: kvalloc client: the daemon refused the connection: kvalloc: NOT_ALLOWED: peer pid "; len(line) < len(want) || line[:len(want)] != want {
		t.Fatalf("child printed %q", line)
	}
	for _, w := range []string{"uid 65534 gid 65534", "is not allowed", "-allow-uid"} {
		if !contains(line, w) {
			t.Fatalf("refusal %q does not say %q", line, w)
		}
	}
	if st := s.Stats(); st.ConnsRefused != 1 {
		t.Fatalf("%d refused", st.ConnsRefused)
	}
	// The same child, with its gid allowed, is served.
	s2 := start(t, server.Config{SocketPath: filepath.Join(dir, "k2.sock"), SocketMode: 0o666, AllowGIDs: []uint32{65534}})
	cmd, lines = child(t, "dialer", s2.SocketPath(),
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}, bin)
	if l := expect(t, lines, ""); l != "connected" {
		t.Fatalf("allowed gid: %q", l)
	}
	cmd.Wait()
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestLapsedWriteQuarantined: a write whose lock lapses while its
// connection lives makes its object unreadable, and its block stays
// quarantined, never given to another writer, until the owner lets go: its
// finish answers WRITE_LAPSED and frees it; a disconnect frees it too.
func TestLapsedWriteQuarantined(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := start(t, server.Config{L1: l1.Config{WriteTTL: time.Second, Now: clock}})
	slow, fast := dial(t, s), dial(t, s)
	k := keys("lapse", 2)
	late, _ := slow.ReserveWrite(k, nil, 1<<20, l1.ModeAll)
	advance(2 * time.Second)
	if res, _ := fast.ReserveRead(k, 1); res[0].Status != wire.StatusKeyNotExist {
		t.Fatalf("a lapsed write is readable: %v", res[0].Status)
	}
	st := s.Stats()
	if st.QuarantinedBytes != 2<<20 || st.Quarantines != 2 || st.UsedBytes != 2<<20 {
		t.Fatalf("quarantined %d bytes (%d writes), used %d", st.QuarantinedBytes, st.Quarantines, st.UsedBytes)
	}
	check(t, s)
	now2, _ := fast.ReserveWrite(k, nil, 1<<20, l1.ModeAll)
	for i := range k {
		if now2[i].Block.Offset == late[i].Block.Offset {
			t.Fatalf("key %d: the lapsed writer's block went to another writer", i)
		}
	}
	sts, err := slow.FinishWrite(k[:1], leasesOf(late[:1]))
	statuses(t, "the lapsed writer finishes", sts, err, wire.StatusWriteLapsed)
	if st := s.Stats(); st.QuarantinedBytes != 1<<20 {
		t.Fatalf("%d bytes quarantined after the owner let go of one", st.QuarantinedBytes)
	}
	before := s.Stats().ConnsClosed
	slow.Close()
	waitClosed(t, s, before+1)
	check(t, s)
	if st := s.Stats(); st.QuarantinedBytes != 0 || st.UsedBytes != 2<<20 || st.ReleasedWrites != 1 {
		t.Fatalf("after the disconnect: quarantined %d, used %d, released %d", st.QuarantinedBytes, st.UsedBytes, st.ReleasedWrites)
	}
	allOK(t, "the other writer finishes")(fast.FinishWrite(k, leasesOf(now2)))
}
