//go:build linux

package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// sizesOf is n expected sizes of size bytes.
func sizesOf(n int, size int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = size
	}
	return s
}

// staleBlocks fills every block of n's pool with 0xAB and deletes the
// objects again, so that whatever is loaded next lands on another
// object's bytes.
func staleBlocks(t *testing.T, n *l2Node, blocks int, blockSize int64) {
	t.Helper()
	keys := l2keys("stale", blocks)
	res, err := n.c.ReserveWrite(keys, nil, blockSize, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	var ok []l1.ObjectKey
	var leases = leasesOf(res)[:0]
	for i, r := range res {
		if r.Status != wire.StatusOK {
			continue
		}
		b, err := n.c.Bytes(r.Block)
		if err != nil {
			t.Fatal(err)
		}
		for j := range b {
			b[j] = 0xAB
		}
		ok, leases = append(ok, keys[i]), append(leases, r.Lease)
	}
	if len(ok) != blocks {
		t.Fatalf("filled %d of %d blocks", len(ok), blocks)
	}
	allOK(t, "FinishWrite")(n.c.FinishWrite(ok, leases))
	l2Idle(t, n) // the copies to L2 hold read locks
	allOK(t, "Delete")(n.c.Delete(ok, false))
}

// l2Idle waits until n's tier holds no lock: no copy, no prefetch.
func l2Idle(t *testing.T, n *l2Node) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); n.s.L2Work() != (server.L2Work{}); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tier is not idle: %+v", n.s.L2Work())
		}
	}
}

// TestL2LayoutMismatch: two engines lay out one key differently (a TP
// degree, a dtype) and the key does not say so. Two daemons share a Redis
// Cluster, with blocks aligned to 1 MiB; node A stores each key at S1 =
// 64 KiB. Node B, whose reader expects S2 = 128 KiB, looks the keys up
// with expected sizes: no L2 hit, nothing prefetched, the size misses
// counted, and its prefix read locks nothing. The same reader expecting
// S1 is then served A's exact bytes, and the rest of each 1 MiB block,
// which held another object's bytes, is zeros. Once B holds the keys at
// S1 in L1, a reader expecting S2 is answered SIZE_MISMATCH (the lookup
// and the read both a miss, counted), while S1 is an L1 hit. A valid
// empty value in L2 is never loaded. The counts are printed.
func TestL2LayoutMismatch(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{})
	msg, err := layoutMismatch(t, c.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
}

// TestL2LayoutMismatchBites: TestL2LayoutMismatch's scenario (over one
// redis-server) catches a daemon that ignores the expected sizes, and
// one that leaves an L2-filled block's bytes past the payload as they
// were.
func TestL2LayoutMismatchBites(t *testing.T) {
	for _, c := range []struct {
		name, want string
		bug        func(*server.Server)
	}{
		{"sizes ignored", "lookup expecting 131072 bytes of 65536-byte values", server.L2IgnoreSizes},
		{"the tail left as it was", "another object's bytes", server.L2DirtyTail},
	} {
		srv := rediscluster.NewServer(t, rediscluster.Options{})
		_, err := layoutMismatch(t, srv.URL(), c.bug)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: not caught: %v", c.name, err)
			continue
		}
		t.Logf("%s: caught: %v", c.name, err)
	}
}

// layoutMismatch is TestL2LayoutMismatch's scenario on the store at url,
// with bug set on node B (nil: none). It returns the line of counts to
// log, or the first thing B did wrong.
func layoutMismatch(t *testing.T, url string, bug func(*server.Server)) (string, error) {
	const align = 1 << 20
	cfg := server.Config{PoolSize: 8 << 20, Align: align}
	a := startL2Node(t, url, l2.Options{}, cfg)
	b := startL2Node(t, url, l2.Options{}, cfg)
	if bug != nil {
		bug(b.s)
	}
	const s1, s2 = 64 << 10, 128 << 10
	keys := l2keys("layout", 4)
	a.write(t, keys, s1, 40)
	a.waitPuts(t, uint64(len(keys)))
	staleBlocks(t, b, 8, align) // every block of B's pool: another object's bytes

	// B expects S2: a miss in L2, counted, and nothing is loaded.
	lk, err := b.c.LookupSized(keys, sizesOf(len(keys), s2), true, 0)
	if err != nil || lk != (wire.Lookup{N: 4}) {
		return "", fmt.Errorf("lookup expecting %d bytes of %d-byte values: %+v, %v", s2, s1, lk, err)
	}
	rr, p, err := b.c.ReserveReadPrefixWaitSized(keys, sizesOf(len(keys), s2), 1, time.Second)
	if err != nil || p != 0 || rr[0].Status != wire.StatusKeyNotExist {
		return "", fmt.Errorf("prefix read expecting %d bytes: prefix %d, %v, %v", s2, p, rr, err)
	}
	if st := b.s.Manager().Stats(); st.Objects != 0 {
		return "", fmt.Errorf("B holds %d objects after a lookup that should load none", st.Objects)
	}
	mis := b.s.LookupCounts()
	if mis.SizeL2 != 1 || mis.L2Hits != 0 || mis.Prefetched != 0 {
		return "", fmt.Errorf("B's counts after the mismatch: %+v", mis)
	}

	// B expects S1: a hit, A's exact bytes, zeros past them.
	lk, err = b.c.LookupSized(keys, sizesOf(len(keys), s1), true, 0)
	if err != nil || lk != (wire.Lookup{N: 4, L2: 4, Prefetch: 4}) {
		return "", fmt.Errorf("lookup expecting %d bytes: %+v, %v", s1, lk, err)
	}
	rr, p, err = b.c.ReserveReadPrefixWaitSized(keys, sizesOf(len(keys), s1), 1, 10*time.Second)
	if err != nil || p != len(keys) {
		return "", fmt.Errorf("prefix read expecting %d bytes: prefix %d, %v, %v", s1, p, rr, err)
	}
	want := make([]byte, s1)
	checked := 0
	for i := range p {
		bs, err := b.c.Bytes(rr[i].Block)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) != align {
			return "", fmt.Errorf("key %d: a block of %d bytes, want %d", i, len(bs), align)
		}
		l2stamp(want, 40+i)
		if !bytes.Equal(bs[:s1], want) {
			return "", fmt.Errorf("WRONG BYTES: key %d's payload is not A's", i)
		}
		if j := bytes.IndexFunc(bs[s1:], func(r rune) bool { return r != 0 }); j >= 0 {
			return "", fmt.Errorf("key %d: byte %d of the block, past the %d-byte payload, is %#x: another object's bytes", i, s1+j, s1, bs[s1+j])
		}
		checked++
	}
	allOK(t, "FinishRead")(b.c.FinishRead(keys, leasesOf(rr), 1))

	// Now L1 holds the keys at S1: S2 is a miss there too, S1 a hit.
	lk, err = b.c.LookupSized(keys, sizesOf(len(keys), s2), true, 0)
	if err != nil || lk != (wire.Lookup{N: 4}) {
		return "", fmt.Errorf("lookup expecting %d bytes of %d-byte L1 objects: %+v, %v", s2, s1, lk, err)
	}
	rr, p, err = b.c.ReserveReadPrefixWaitSized(keys, sizesOf(len(keys), s2), 1, 0)
	if err != nil || p != 0 || rr[0].Status != wire.StatusSizeMismatch || rr[1].Status != wire.StatusSkipped {
		return "", fmt.Errorf("L1 prefix read expecting %d bytes: prefix %d, %v, %v", s2, p, rr, err)
	}
	mixed := []int64{s1, s1, s2, s1}
	rr, p, err = b.c.ReserveReadPrefixWaitSized(keys, mixed, 1, 0)
	if err != nil || p != 2 || rr[2].Status != wire.StatusSizeMismatch || rr[3].Status != wire.StatusSkipped {
		return "", fmt.Errorf("L1 prefix read expecting %v: prefix %d, %v, %v", mixed, p, rr, err)
	}
	allOK(t, "FinishRead")(b.c.FinishRead(keys[:2], leasesOf(rr[:2]), 1))
	lk, err = b.c.LookupSized(keys, sizesOf(len(keys), s1), false, 0)
	if err != nil || lk != (wire.Lookup{N: 4, L1: 4}) {
		return "", fmt.Errorf("lookup expecting %d bytes of L1 objects of that size: %+v, %v", s1, lk, err)
	}

	// A valid empty value: no L1 object is empty, so it is never loaded,
	// with expected sizes or without.
	empty := l2keys("empty", 1)
	v, err := l2.Encode(nil, &empty[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := a.tier.Put(context.Background(), empty, [][]byte{v}); n != 1 {
		return "", errors.New("the empty value was not stored")
	}
	staleBlocks(t, b, 4, align)
	if lk, err := b.c.Lookup(empty, true); err != nil || lk != (wire.Lookup{N: 1}) {
		return "", fmt.Errorf("lookup of an empty value: %+v, %v", lk, err)
	}
	if _, ok := b.s.Manager().State(empty[0]); ok {
		return "", errors.New("an empty L2 value became an L1 object")
	}
	lc := b.s.LookupCounts()
	if lc.SizeL1 != 1 || lc.SizeL2 != 2 || lc.SizeRead != 2 || lc.Loaded != 4 {
		return "", fmt.Errorf("B's counts: %+v", lc)
	}
	check(t, a.s)
	check(t, b.s)
	return fmt.Sprintf("layout mismatch: %d-byte values read as %d: l2 size misses %d, l1 size misses %d, SIZE_MISMATCH reads %d; "+
		"as %d: %d loaded, %d blocks checked byte for byte (A's payload, then zeros to %d); B's tier %+v",
		s1, s2, lc.SizeL2, lc.SizeL1, lc.SizeRead, s1, lc.Loaded, checked, align, b.tier.Stats()), nil
}

// TestL2TemporaryObjects probes temporary objects with L2 on, on two
// daemons over one redis-server. Node A copies none of them (its reader
// still finds one finished with finish_write_and_reserve_read, and it is
// gone after). On node B, with A's ordinary copy of key 0 in L2: while B
// writes key 0 as a temporary object, a lookup counts it in L2 but
// cannot prefetch over it (the key is B's writer's); B's reader then
// reads B's own bytes, which consumes the object, and the next lookup
// loads A's copy as an ordinary object that a second read does not
// consume. Neither daemon is left holding a lock, and their ledgers agree
// with l1 throughout (Check).
func TestL2TemporaryObjects(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	b := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	const size = 8192
	keys := l2keys("tmpl2", 2)

	// A: key 1 temporary, finished and read in one call; key 0 ordinary.
	res, err := a.c.ReserveWrite(keys, []bool{false, true}, size, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		bs, err := a.c.Bytes(r.Block)
		if err != nil {
			t.Fatal(err)
		}
		l2stamp(bs[:size], 70+i)
	}
	rr, err := a.c.FinishWriteAndReserveRead(keys, leasesOf(res), 1)
	if err != nil || rr[0].Status != wire.StatusOK || rr[1].Status != wire.StatusOK {
		t.Fatalf("FinishWriteAndReserveRead: %v, %v", rr, err)
	}
	a.waitPuts(t, 1)
	l2Idle(t, a)
	allOK(t, "FinishRead")(a.c.FinishRead(keys, leasesOf(rr), 1))
	if _, ok := a.s.Manager().State(keys[1]); ok {
		t.Fatal("A's temporary object outlived its reader")
	}
	if s := a.tier.Stats(); s.Puts != 1 {
		t.Fatalf("A's tier %+v: want the ordinary object's put alone", s)
	}
	if sz := a.tier.Head(context.Background(), keys); sz[0] != size || sz[1] != -1 {
		t.Fatalf("L2 holds sizes %v, want [%d -1]", sz, size)
	}

	// B writes key 0 as a temporary object of its own.
	res, err = b.c.ReserveWrite(keys[:1], []bool{true}, size, l1.ModeAll)
	if err != nil || res[0].Status != wire.StatusOK {
		t.Fatalf("B's temporary write: %v, %v", res, err)
	}
	bs, err := b.c.Bytes(res[0].Block)
	if err != nil {
		t.Fatal(err)
	}
	l2stamp(bs[:size], 90)
	lk, err := b.c.LookupSized(keys[:1], []int64{size}, true, 0)
	if err != nil || lk != (wire.Lookup{N: 1, L2: 1}) {
		t.Fatalf("lookup over B's temporary write: %+v, %v (want an L2 hit, no prefetch)", lk, err)
	}
	check(t, b.s)
	allOK(t, "FinishWrite")(b.c.FinishWrite(keys[:1], leasesOf(res)))
	l2Idle(t, b)
	if s := b.tier.Stats(); s.Puts != 0 {
		t.Fatalf("B copied its temporary object: %+v", s)
	}
	if p := b.readPrefix(t, keys[:1], size, 90, 0); p != 1 {
		t.Fatalf("B's reader of its temporary object: prefix %d", p)
	}
	if _, ok := b.s.Manager().State(keys[0]); ok {
		t.Fatal("B's temporary object outlived its reader")
	}

	// Gone from B's L1: A's ordinary copy loads, and stays after a read.
	lk, err = b.c.LookupSized(keys[:1], []int64{size}, true, 0)
	if err != nil || lk != (wire.Lookup{N: 1, L2: 1, Prefetch: 1}) {
		t.Fatalf("lookup after the temporary object went: %+v, %v", lk, err)
	}
	if p := b.readPrefix(t, keys[:1], size, 70, 10*time.Second); p != 1 {
		t.Fatalf("B's read of A's copy: prefix %d", p)
	}
	if st, ok := b.s.Manager().State(keys[0]); !ok || st.Temporary || !st.Finished {
		t.Fatalf("the loaded copy after its read: %+v, %v (want an ordinary object)", st, ok)
	}
	l2Idle(t, b)
	check(t, a.s)
	check(t, b.s)
	for _, n := range []*l2Node{a, b} {
		if r := n.s.Verify(); r.WriteLocked != 0 || r.ReadLocks != 0 {
			t.Fatalf("locks left: %+v", r)
		}
	}
}

// TestSizedPrefixAtTheReadLimit: expected sizes need no L2 (a daemon
// without one checks its L1 objects), and a sized prefix read is cut at
// the connection's read-lock limit as any prefix read is: the key at the
// cut OVER_LIMIT when the prefix reached it, SKIPPED when a
// SIZE_MISMATCH stopped it first.
func TestSizedPrefixAtTheReadLimit(t *testing.T) {
	s := start(t, server.Config{ConnReadLocks: 2})
	c := dial(t, s)
	const size = 4096
	keys := l2keys("sizedlimit", 4)
	res, err := c.ReserveWrite(keys, nil, size, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "FinishWrite")(c.FinishWrite(keys, leasesOf(res)))
	if lk, err := c.LookupSized(keys, []int64{size, size, 1, size}, false, 0); err != nil || lk != (wire.Lookup{N: 4, L1: 2}) {
		t.Fatalf("lookup without L2, key 2 of another size: %+v, %v", lk, err)
	}
	rr, p, err := c.ReserveReadPrefixWaitSized(keys, sizesOf(4, size), 1, 0)
	want := []wire.Status{wire.StatusOK, wire.StatusOK, wire.StatusOverLimit, wire.StatusSkipped}
	if err != nil || p != 2 || statusesOf(rr) != fmt.Sprint(want) {
		t.Fatalf("sized prefix read at the limit: prefix %d, %v, %v; want %v", p, statusesOf(rr), err, want)
	}
	allOK(t, "FinishRead")(c.FinishRead(keys[:2], leasesOf(rr[:2]), 1))
	rr, p, err = c.ReserveReadPrefixWaitSized(keys, []int64{size, 2 * size, size, size}, 1, 0)
	want = []wire.Status{wire.StatusOK, wire.StatusSizeMismatch, wire.StatusSkipped, wire.StatusSkipped}
	if err != nil || p != 1 || statusesOf(rr) != fmt.Sprint(want) {
		t.Fatalf("sized prefix read stopped before the limit: prefix %d, %v, %v; want %v", p, statusesOf(rr), err, want)
	}
	allOK(t, "FinishRead")(c.FinishRead(keys[:1], leasesOf(rr[:1]), 1))
	gap := []l1.ObjectKey{keys[0], l2keys("sizedlimit-absent", 1)[0], keys[1]}
	rr, p, err = c.ReserveReadPrefixWaitSized(gap, sizesOf(3, size), 1, 0)
	want = []wire.Status{wire.StatusOK, wire.StatusKeyNotExist, wire.StatusSkipped}
	if err != nil || p != 1 || statusesOf(rr) != fmt.Sprint(want) {
		t.Fatalf("sized prefix read over an absent key: prefix %d, %v, %v; want %v", p, statusesOf(rr), err, want)
	}
	allOK(t, "FinishRead")(c.FinishRead(gap[:1], leasesOf(rr[:1]), 1))
	// The daemon's own refusal of a size below 1 (the clients refuse it
	// before sending): INVALID_ARGUMENT, nothing locked, the connection
	// open.
	r := raw(t, s, true)
	for id, q := range []wire.Request{
		{Type: wire.TypeReserveReadPrefixWait, Locks: 1, Keys: keys, Sizes: []int64{size, size, 0, size}},
		{Type: wire.TypeLookup, Flags: wire.FlagPrefetch, Keys: keys, Sizes: []int64{size, -1, size, size}},
	} {
		q.ID, q.Epoch = uint32(id+2), r.epoch
		r.send(r.frame(q))
		if a := r.answer(); a.Code != wire.CodeInvalidArgument || len(a.Results) != 0 || !strings.Contains(a.Message, "expected size") {
			t.Fatalf("%v with a size below 1: %v %q, %d results", q.Type, a.Code, a.Message, len(a.Results))
		}
	}
	r.send(r.frame(wire.Request{Type: wire.TypePing, ID: 9, Epoch: r.epoch}))
	if a := r.answer(); a.Code != wire.CodeOK {
		t.Fatalf("ping after the refusals: %v", a.Code)
	}
	if lc := s.LookupCounts(); lc.SizeL1 != 1 || lc.SizeRead != 1 {
		t.Fatalf("counts: %+v", lc)
	}
	check(t, s)
}

func statusesOf(res []client.Result) string {
	sts := make([]wire.Status, len(res))
	for i, r := range res {
		sts[i] = r.Status
	}
	return fmt.Sprint(sts)
}
