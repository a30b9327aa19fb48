//go:build linux

package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
)

// TestL2KilledMidPrefetch runs kvallocd processes with -l2 on a real
// redis-server: node A writes objects, all of which reach Redis; node B
// looks them up with prefetch and is SIGKILLed as soon as the lookup
// answers, its loads from L2 in flight under its own write locks. A fresh
// B on the same socket then loads every key from L2 again, byte for byte:
// the kill left nothing in Redis to refuse, and nothing of the dead
// daemon's locks in the next one. Once its reads are released it holds no
// write lock and no read lock, and once its objects are deleted, no byte.
func TestL2KilledMidPrefetch(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	dir := t.TempDir()
	sockA, sockB := filepath.Join(dir, "a.sock"), filepath.Join(dir, "b.sock")
	args := func(sock string) []string {
		return []string{"-socket", sock, "-pool-size", "256MiB", "-populate=false", "-l2", srv.URL(), "-l2-timeout", "2s",
			"-l2-min-rate", "0", "-l2-insecure-no-mac"} // the kill is the test, not the MAC
	}
	daemon(t, args(sockA)...)
	ca := dialWait(t, sockA)
	const size = 1 << 20
	const n = 48
	keys := make([]l1.ObjectKey, n)
	for i := range keys {
		keys[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("prefetch-%03d", i), Model: "m"}
	}
	res, err := ca.ReserveWrite(keys, nil, size, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	leases := make([]client.Lease, n)
	for i, r := range res {
		b, _ := ca.Bytes(r.Block)
		fill(b[:size], i)
		leases[i] = r.Lease
	}
	if _, err := ca.FinishWrite(keys, leases); err != nil {
		t.Fatal(err)
	}
	rc := srv.Client()
	defer rc.Close()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if k, _ := rc.DBSize(t.Context()).Result(); k >= n {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the puts did not all reach Redis")
		}
	}

	b, _ := daemon(t, args(sockB)...)
	cb := dialWait(t, sockB)
	lk, err := cb.Lookup(keys, true)
	if err != nil || lk.Prefetch == 0 {
		t.Fatalf("B's lookup: %+v, %v", lk, err)
	}
	if err := b.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.Wait()
	cb.Close()

	daemon(t, args(sockB)...)
	cb2 := dialWait(t, sockB)
	if lk, err := cb2.Lookup(keys, true); err != nil || int(lk.L2) != n || lk.L1 != 0 {
		t.Fatalf("the next B's lookup: %+v, %v", lk, err)
	}
	rr, p, err := cb2.ReserveReadPrefixWait(keys, 1, 9*time.Second)
	if err != nil || p != n {
		t.Fatalf("the next B read a prefix of %d of %d: %v", p, n, err)
	}
	want := make([]byte, size)
	wrong := 0
	for i := range p {
		got, _ := cb2.Bytes(rr[i].Block)
		fill(want, i)
		if !bytes.Equal(got[:size], want) {
			wrong++
		}
	}
	rl := make([]client.Lease, p)
	for i := range rl {
		rl[i] = rr[i].Lease
	}
	if _, err := cb2.FinishRead(keys, rl, 1); err != nil {
		t.Fatal(err)
	}
	st, err := cb2.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb2.Delete(keys, false); err != nil {
		t.Fatal(err)
	}
	after, err := cb2.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed mid-prefetch of %d keys of %d MiB (%d prefetching): the next daemon loaded %d, wrong bytes %d; "+
		"then write-locked %d, read-locked temporaries %d, objects %d; after deleting them used bytes %d",
		n, size>>20, lk.Prefetch, p, wrong, st.WriteLocked, st.TemporaryReadLocked, st.Objects, after.UsedBytes)
	if wrong != 0 || st.WriteLocked != 0 || st.Objects != n || after.UsedBytes != 0 || after.Objects != 0 {
		t.Fatalf("wrong bytes %d, write-locked %d, objects %d; after deleting: %d objects, %d bytes used",
			wrong, st.WriteLocked, st.Objects, after.Objects, after.UsedBytes)
	}
}
