//go:build linux

package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
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

// l2Node is one daemon over a shared L2 store: one node of a cluster.
type l2Node struct {
	s    *server.Server
	c    *client.Client
	tier *l2.Tier
}

func startL2Node(t *testing.T, url string, topts l2.Options, cfg server.Config) *l2Node {
	t.Helper()
	r, err := l2.NewRedis(context.Background(), url, l2.RedisOptions{Timeout: topts.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l2.NewTier(r, topts)
	if err != nil {
		t.Fatal(err)
	}
	cfg.L2.Store = tier
	s := start(t, cfg)
	return &l2Node{s: s, c: dial(t, s), tier: tier}
}

// l2stamp fills b with a pattern that names key i and offset.
func l2stamp(b []byte, seed int) {
	for off := 0; off+8 <= len(b); off += 8 {
		binary.LittleEndian.PutUint64(b[off:], uint64(seed)<<40|uint64(off))
	}
}

// write stores keys of size bytes each through n's client, stamped from
// seed, and returns nothing until finished.
func (n *l2Node) write(t *testing.T, keys []l1.ObjectKey, size int64, seed int) {
	t.Helper()
	res, err := n.c.ReserveWrite(keys, nil, size, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != wire.StatusOK {
			t.Fatalf("ReserveWrite %d: %v", i, r.Status)
		}
		b, err := n.c.Bytes(r.Block)
		if err != nil {
			t.Fatal(err)
		}
		l2stamp(b[:size], seed+i)
	}
	allOK(t, "FinishWrite")(n.c.FinishWrite(keys, leasesOf(res)))
}

// waitPuts waits until n's tier has stored want values.
func (n *l2Node) waitPuts(t *testing.T, want uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for n.tier.Stats().Puts < want {
		if time.Now().After(deadline) {
			t.Fatalf("L2 puts %+v, want %d", n.tier.Stats(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readPrefix reads keys' prefix through n (waiting up to wait for a
// prefetch), checks every byte of it against the stamps, releases it, and
// returns its length.
func (n *l2Node) readPrefix(t *testing.T, keys []l1.ObjectKey, size int64, seed int, wait time.Duration) int {
	t.Helper()
	res, p, err := n.c.ReserveReadPrefixWait(keys, 1, wait)
	if err != nil {
		t.Fatalf("ReserveReadPrefixWait: %v", err)
	}
	want := make([]byte, size)
	for i := range p {
		b, err := n.c.Bytes(res[i].Block)
		if err != nil {
			t.Fatal(err)
		}
		l2stamp(want, seed+i)
		if !bytes.Equal(b[:size], want) {
			t.Fatalf("WRONG BYTES: key %d (%v) of the prefix", i, keys[i])
		}
	}
	allOK(t, "FinishRead")(n.c.FinishRead(keys[:p], leasesOf(res[:p]), 1))
	return p
}

func l2keys(prefix string, n int) []l1.ObjectKey {
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%s-%05d", prefix, i), Model: "llama", KVRank: 1, CacheSalt: "t"}
	}
	return ks
}

// TestL2SharesAcrossNodes: what node A finishes reaches L2 by itself; node
// B's lookup reports it as L2 hits and prefetches it, and B's prefix read
// serves A's exact bytes; B's L1 then holds them (an L1 hit on the next
// lookup). Both daemons' ledgers, the daemon's own locks included, agree
// with l1 throughout (Check).
func TestL2SharesAcrossNodes(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	b := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	const size = 64<<10 + 100 // not a multiple of the alignment
	keys := l2keys("share", 12)
	a.write(t, keys[:10], size, 7)
	a.waitPuts(t, 10)
	check(t, a.s)

	lk, err := b.c.Lookup(keys, false)
	if err != nil || lk != (wire.Lookup{N: 12, L1: 0, L2: 10}) {
		t.Fatalf("lookup without prefetch: %+v, %v", lk, err)
	}
	lk, err = b.c.Lookup(keys, true)
	if err != nil || lk != (wire.Lookup{N: 12, L1: 0, L2: 10, Prefetch: 10}) {
		t.Fatalf("lookup with prefetch: %+v, %v", lk, err)
	}
	check(t, b.s) // mid-prefetch, the daemon's write locks are accounted
	if p := b.readPrefix(t, keys, size, 7, 5*time.Second); p != 10 {
		t.Fatalf("B read a prefix of %d, want 10", p)
	}
	lk, _ = b.c.Lookup(keys, true)
	if lk.L1 != 10 || lk.L2 != 0 {
		t.Fatalf("after the prefetch: %+v, want 10 L1 hits", lk)
	}
	check(t, a.s)
	check(t, b.s)
	if s := b.tier.Stats(); s.Hits != 10 || s.Corrupt != 0 {
		t.Fatalf("B's tier: %+v", s)
	}
	if lc := b.s.LookupCounts(); lc != (server.LookupCounts{Lookups: 3, L1Hits: 10, L2Hits: 20, Prefetched: 10, Loaded: 10}) {
		t.Fatalf("B's lookup counts: %+v", lc)
	}
}

// TestL2CorruptNeverServed: a value corrupted in Redis directly (a payload
// byte: its header still checks, so the lookup counts it) is loaded,
// refused, aborted and deleted: the prefix read stops there, a miss and
// not an error, and no wrong byte is served.
func TestL2CorruptNeverServed(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	b := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	const size = 8192
	keys := l2keys("corrupt", 6)
	a.write(t, keys, size, 3)
	a.waitPuts(t, 6)
	rc := srv.Client()
	defer rc.Close()
	name := l2.StoreKey(l2.DefaultPrefix, &keys[3])
	if err := rc.SetRange(context.Background(), name, int64(l2.PrefixLen(&keys[3])+77), "\x00\xff").Err(); err != nil {
		t.Fatal(err)
	}
	lk, err := b.c.Lookup(keys, true)
	if err != nil || lk.L2 != 6 || lk.Prefetch != 6 {
		t.Fatalf("lookup: %+v, %v", lk, err)
	}
	if p := b.readPrefix(t, keys, size, 3, 5*time.Second); p != 3 {
		t.Fatalf("prefix %d, want 3 (key 3 is corrupt)", p)
	}
	if s := b.tier.Stats(); s.Corrupt != 1 {
		t.Fatalf("B's tier: %+v", s)
	}
	if n, _ := rc.Exists(context.Background(), name).Result(); n != 0 {
		t.Fatal("the corrupt value is still in Redis")
	}
	check(t, b.s)
}

// TestL2LookupOfHungStore: a lookup against a hung Redis (SIGSTOP)
// costs at most the tier's timeout and answers no L2 hits, not an error.
func TestL2LookupOfHungStore(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	const timeout = 300 * time.Millisecond
	a := startL2Node(t, srv.URL(), l2.Options{Timeout: timeout}, server.Config{})
	b := startL2Node(t, srv.URL(), l2.Options{Timeout: timeout}, server.Config{})
	keys := l2keys("hung", 4)
	a.write(t, keys, 4096, 1)
	a.waitPuts(t, 4)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	defer srv.Cont()
	start := time.Now()
	lk, err := b.c.Lookup(keys, true)
	if err != nil || lk.L2 != 0 || lk.Prefetch != 0 {
		t.Fatalf("lookup of a hung L2: %+v, %v", lk, err)
	}
	if el := time.Since(start); el > timeout+time.Second {
		t.Fatalf("a lookup of a hung L2 took %v (timeout %v)", el, timeout)
	}
	check(t, b.s)
}

// hungGet is a Store whose Get and Load wait for release (or their
// context) first.
type hungGet struct {
	l2.Store
	release chan struct{}
}

func (h *hungGet) Get(ctx context.Context, keys []l1.ObjectKey) [][]byte {
	select {
	case <-h.release:
	case <-ctx.Done():
		return make([][]byte, len(keys))
	}
	return h.Store.Get(ctx, keys)
}

func (h *hungGet) Load(ctx context.Context, keys []l1.ObjectKey, dst [][]byte) []bool {
	select {
	case <-h.release:
	case <-ctx.Done():
		return make([]bool, len(keys))
	}
	return h.Store.Load(ctx, keys, dst)
}

// TestL2WaitDeadlineIsMiss: while a prefetch's get hangs, its keys are the
// daemon's writes (Check accounts them); a prefix read whose wait ends
// first answers KEY_NOT_READABLE, a miss and not an error, on time; once
// the get goes through, the next read serves every byte.
func TestL2WaitDeadlineIsMiss(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	r, err := l2.NewRedis(context.Background(), srv.URL(), l2.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tier, _ := l2.NewTier(r, l2.Options{})
	hung := &hungGet{Store: tier, release: make(chan struct{})}
	bs := start(t, server.Config{L2: server.L2Config{Store: hung}})
	bc := dial(t, bs)
	b := &l2Node{s: bs, c: bc, tier: tier}
	keys := l2keys("wait", 4)
	a.write(t, keys, 4096, 5)
	a.waitPuts(t, 4)
	lk, err := b.c.Lookup(keys, true)
	if err != nil || lk.Prefetch != 4 {
		t.Fatalf("lookup: %+v, %v", lk, err)
	}
	check(t, b.s)
	start := time.Now()
	res, p, err := b.c.ReserveReadPrefixWait(keys, 1, 100*time.Millisecond)
	el := time.Since(start)
	if err != nil || p != 0 || res[0].Status != wire.StatusKeyNotReadable {
		t.Fatalf("read past the deadline: prefix %d, %v, %v", p, res, err)
	}
	if el < 100*time.Millisecond || el > time.Second {
		t.Fatalf("a wait of 100ms took %v", el)
	}
	close(hung.release)
	if p := b.readPrefix(t, keys, 4096, 5, 5*time.Second); p != 4 {
		t.Fatalf("after the release: prefix %d, want 4", p)
	}
	check(t, b.s)
}

// TestL2Metrics: /metrics of a daemon with an L2 tier serves the tier's
// counters and histograms and the lookups' L1 and L2 hits.
func TestL2Metrics(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{MetricsAddr: "127.0.0.1:0"})
	keys := l2keys("metrics", 3)
	a.write(t, keys, 4096, 1)
	a.waitPuts(t, 3)
	if _, err := a.c.Delete(keys[1:], false); err != nil {
		t.Fatal(err)
	}
	if lk, err := a.c.Lookup(keys, false); err != nil || lk.L1 != 1 || lk.L2 != 2 {
		t.Fatalf("lookup: %+v, %v", lk, err)
	}
	resp, err := http.Get("http://" + a.s.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		"kvallocd_l2_puts_total 3", "kvallocd_l2_written_bytes_total", "kvallocd_l2_breaker_state 0",
		"kvallocd_l2_checksum_failures_total 0", "kvallocd_l2_drops_total 0", "kvallocd_l2_put_seconds_bucket",
		"kvallocd_l2_get_seconds_count", "kvallocd_lookups_total 1", "kvallocd_lookup_l1_hits_total 1",
		"kvallocd_lookup_l2_hits_total 2", `kvallocd_lookup_l2_unpaid_total{reason="rate"} 0`,
		`kvallocd_lookup_l2_unpaid_total{reason="budget"} 0`, "kvallocd_l2_prefetch_probe_keys_total 0",
		"kvallocd_l2_load_rate_bytes_per_second 0", "kvallocd_l2_load_samples_total 0",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// TestL2TemporaryNotCopied: a temporary object is removed when its last
// read lock goes, so the copy to L2, which read-locks it, would consume it
// before its reader came: temporary objects are not copied. Finished with
// finish_write, one is still there for its reader once the tier is idle,
// and L2 holds no value of it; an ordinary object beside it is copied.
func TestL2TemporaryNotCopied(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	keys := l2keys("temp", 2)
	res, err := a.c.ReserveWrite(keys, []bool{true, false}, 4096, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "FinishWrite")(a.c.FinishWrite(keys, leasesOf(res)))
	a.waitPuts(t, 1)
	for deadline := time.Now().Add(10 * time.Second); a.s.L2Work() != (server.L2Work{}); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the tier is not idle: %+v", a.s.L2Work())
		}
	}
	if st, ok := a.s.Manager().State(keys[0]); !ok || !st.Finished {
		t.Fatalf("the temporary object is gone before its reader: %+v, %v", st, ok)
	}
	if s := a.tier.Stats(); s.Puts != 1 {
		t.Fatalf("puts %+v, want the ordinary object's only", s)
	}
	rr, err := a.c.ReserveRead(keys[:1], 1)
	if err != nil || rr[0].Status != wire.StatusOK {
		t.Fatalf("the temporary object's reader: %v, %v", rr, err)
	}
	allOK(t, "FinishRead")(a.c.FinishRead(keys[:1], leasesOf(rr), 1))
	if _, ok := a.s.Manager().State(keys[0]); ok {
		t.Fatal("the temporary object outlived its reader")
	}
	check(t, a.s)
}
