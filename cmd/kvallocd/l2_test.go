//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

func dialWait(t *testing.T, sock string) *client.Client {
	t.Helper()
	waitSocket(t, sock)
	// A killed daemon's socket file stays until the next one replaces it.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		c, err := client.Dial(sock, client.Options{})
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal(err)
		}
	}
}

func fill(b []byte, key int) {
	for off := 0; off+8 <= len(b); off += 8 {
		binary.LittleEndian.PutUint64(b[off:], uint64(key)<<32|uint64(off))
	}
}

// TestL2KilledDaemonWarmsUpFromL2 runs kvallocd processes with -l2 on a
// real redis-server: node A writes objects and is SIGKILLed at once, its
// puts in flight; a fresh A on the same socket then reads the prefix back
// through lookup and reserve_read_prefix_wait. The objects are 4 pieces
// each (kvallocd's default -l2-piece-size), so the kill leaves objects of
// which some pieces reached Redis and some did not. Every byte it serves
// is what the killed A wrote (a SET is atomic, every piece is checked,
// and an object short of a piece is a miss: nothing half-written is
// served), its hits over the requests recover from 0 to what reached L2,
// and afterwards it holds no write lock and, once the keys are deleted,
// no byte.
func TestL2KilledDaemonWarmsUpFromL2(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	dir := t.TempDir()
	sock := filepath.Join(dir, "a.sock")
	args := []string{"-socket", sock, "-pool-size", "256MiB", "-populate=false", "-l2", srv.URL(), "-l2-timeout", "2s",
		"-l2-secret-file", secretFile(t, 1),
		"-l2-min-rate", "0"} // the warm-up from L2 is the test, not the break-even rule
	a, _ := daemon(t, args...)
	c := dialWait(t, sock)
	const size = 4 * l2.DefaultPieceSize
	const n = 64
	keys := make([]l1.ObjectKey, n)
	for i := range keys {
		keys[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("warm-%03d", i), Model: "m"}
	}
	res, err := c.ReserveWrite(keys, nil, size, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	leases := make([]client.Lease, n)
	for i, r := range res {
		b, _ := c.Bytes(r.Block)
		fill(b[:size], i)
		leases[i] = r.Lease
	}
	if _, err := c.FinishWrite(keys, leases); err != nil {
		t.Fatal(err)
	}
	// Kill it once some objects are whole in Redis (their piece 0, the
	// commit, written last): the others are in flight.
	rc := srv.Client()
	defer rc.Close()
	heads := make([]string, n)
	for i := range keys {
		heads[i] = l2.PieceName(l2.DefaultPrefix, &keys[i], 0)
	}
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if k, _ := rc.Exists(t.Context(), heads...).Result(); k >= 4 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("no put reached Redis")
		}
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.Wait()
	c.Close()

	daemon(t, args...)
	c2 := dialWait(t, sock)
	// A request is one lookup and read per key: the puts went out in
	// parallel, so what reached Redis is a scattering of keys, not a
	// prefix.
	var curve, l2hits []int
	want := make([]byte, size)
	for req := range 3 {
		l1h, l2h := 0, 0
		for i := range keys {
			k := keys[i : i+1]
			lk, err := c2.Lookup(k, true)
			if err != nil {
				t.Fatal(err)
			}
			l1h += int(lk.L1)
			l2h += int(lk.L2)
			rr, p, err := c2.ReserveReadPrefixWait(k, 1, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if p == 0 {
				if lk.L1+lk.L2 > 0 {
					t.Fatalf("request %d: key %d was a hit (%+v) and did not load: %v", req, i, lk, rr[0].Status)
				}
				continue
			}
			b, _ := c2.Bytes(rr[0].Block)
			fill(want, i)
			if !bytes.Equal(b[:size], want) {
				t.Fatalf("request %d: WRONG BYTES for key %d", req, i)
			}
			if _, err := c2.FinishRead(k, []client.Lease{rr[0].Lease}, 1); err != nil {
				t.Fatal(err)
			}
		}
		if req == 0 && l1h != 0 {
			t.Fatalf("a fresh daemon has %d L1 hits", l1h)
		}
		curve, l2hits = append(curve, l1h), append(l2hits, l2h)
	}
	inRedis, _ := rc.DBSize(t.Context()).Result()
	st, err := c2.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Delete(keys, false); err != nil {
		t.Fatal(err)
	}
	after, err := c2.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed mid-put with %d of %d pieces in Redis (%d objects of 4); after the restart, per request: L1 hits %v, L2 hits %v; write-locked %d, used bytes after delete %d",
		inRedis, 4*n, n, curve, l2hits, st.WriteLocked, after.UsedBytes)
	if curve[len(curve)-1] == 0 || l2hits[0] == 0 || curve[1] != l2hits[0] {
		t.Fatalf("the restarted daemon did not warm up from L2: L1 %v, L2 %v", curve, l2hits)
	}
	if st.WriteLocked != 0 || after.UsedBytes != 0 || after.Objects != 0 {
		t.Fatalf("after the reads: write-locked %d; after deleting every key: %d objects, %d bytes used", st.WriteLocked, after.Objects, after.UsedBytes)
	}
}

// TestL2MinRateFlag: -l2-min-rate defaults to the break-even of
// server.DefaultL2MinRate, in GB/s, reaches the daemon's config in bytes
// per second, and a rate that is not one (negative, NaN, infinite) or a
// probe interval that is not positive is refused before any connection.
func TestL2MinRateFlag(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	var f l2Flags
	cfg, _, err := parse([]string{"-l2", srv.URL(), "-l2-insecure-no-mac"}, io.Discard, &f)
	if err != nil || f.minRate != 0.70272 || f.probeInterval != server.DefaultL2ProbeInterval {
		t.Fatalf("defaults: %+v, %v", f, err)
	}
	if err := f.open(t.Context(), &cfg); err != nil || cfg.L2.MinRate != server.DefaultL2MinRate {
		t.Fatalf("open: MinRate %v, %v", cfg.L2.MinRate, err)
	}
	cfg.L2.Store.Close()
	for _, args := range [][]string{{"-l2-min-rate", "-1"}, {"-l2-min-rate", "NaN"}, {"-l2-min-rate", "+Inf"}, {"-l2-probe-interval", "0s"}} {
		var f l2Flags
		cfg, _, err := parse(append([]string{"-l2", "redis://127.0.0.1:1", "-l2-insecure-no-mac"}, args...), io.Discard, &f)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.open(t.Context(), &cfg); err == nil || !strings.Contains(err.Error(), "-l2-min-rate") {
			t.Errorf("%v: %v, want a refusal", args, err)
		}
	}
}

// TestL2PutShapeFlags: kvallocd's puts to L2 go out in the daemon's
// measured shape by default, 8 workers of 2 objects (a finish of a few
// large objects over every master at once), while a prefetch get carries
// -l2-batch keys, or more within -l2-batch-bytes; each is a flag of its
// own, and 0 is refused.
func TestL2PutShapeFlags(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	for _, c := range []struct {
		args                          []string
		batch, workers, prefetchBatch int
		prefetchBytes                 int64
	}{
		{nil, 2, 8, 8, server.DefaultL2PrefetchBytes},
		{[]string{"-l2-put-batch", "3", "-l2-put-workers", "5", "-l2-batch", "16", "-l2-batch-bytes", "1MiB"}, 3, 5, 16, 1 << 20},
	} {
		var f l2Flags
		cfg, _, err := parse(append([]string{"-l2", srv.URL(), "-l2-insecure-no-mac"}, c.args...), io.Discard, &f)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if err := f.open(t.Context(), &cfg); err != nil {
			t.Fatalf("%q: open: %v", c.args, err)
		}
		cfg.L2.Store.Close()
		if got := cfg.L2; got.Batch != c.batch || got.Workers != c.workers || got.PrefetchBatch != c.prefetchBatch || got.PrefetchBytes != c.prefetchBytes {
			t.Errorf("%q: puts of %d by %d workers, gets of %d keys and %d bytes; want %d by %d, gets of %d and %d",
				c.args, got.Batch, got.Workers, got.PrefetchBatch, got.PrefetchBytes, c.batch, c.workers, c.prefetchBatch, c.prefetchBytes)
		}
	}
	for _, args := range [][]string{{"-l2-put-batch", "0"}, {"-l2-put-workers", "0"}, {"-l2-batch", "0"}, {"-l2-batch-bytes", "0"}, {"-l2-batch-bytes", "lots"}} {
		var f l2Flags
		cfg, _, err := parse(append([]string{"-l2", "redis://127.0.0.1:1", "-l2-insecure-no-mac"}, args...), io.Discard, &f)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.open(t.Context(), &cfg); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v, want a refusal naming it", args, err)
		}
	}
}

// TestL2PieceSizeFlag: kvallocd stores objects in pieces of 256 KiB by
// default, -l2-piece-size sets the size, 0 stores whole values, and a
// size that is not one is refused.
func TestL2PieceSizeFlag(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	for _, c := range []struct {
		args []string
		want int64
	}{{nil, 256 << 10}, {[]string{"-l2-piece-size", "1MiB"}, 1 << 20}, {[]string{"-l2-piece-size", "0"}, 0}} {
		var f l2Flags
		cfg, _, err := parse(append([]string{"-l2", srv.URL(), "-l2-insecure-no-mac"}, c.args...), io.Discard, &f)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if err := f.open(t.Context(), &cfg); err != nil {
			t.Fatalf("%q: open: %v", c.args, err)
		}
		if got := cfg.L2.Store.(*l2.Tier).Options().PieceSize; got != c.want {
			t.Errorf("%q: pieces of %d bytes, want %d", c.args, got, c.want)
		}
		cfg.L2.Store.Close()
	}
	for _, v := range []string{"-1", "lots", "2GiB"} {
		var f l2Flags
		cfg, _, err := parse([]string{"-l2", srv.URL(), "-l2-insecure-no-mac", "-l2-piece-size", v}, io.Discard, &f)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.open(t.Context(), &cfg); err == nil || !strings.Contains(err.Error(), "piece") {
			t.Errorf("-l2-piece-size %s: %v, want a refusal naming it", v, err)
		}
	}
}

// TestL2TimeoutFlag: -l2-timeout past l2.MaxTimeout is refused before any
// connection: a lookup waits up to one L2 timeout, and one of 12 s would
// outlast a client's default deadline of 10 s (its connection closed, its
// lookup failed because of L2). l2.MaxTimeout itself is taken.
func TestL2TimeoutFlag(t *testing.T) {
	if l2.MaxTimeout >= client.DefaultTimeout {
		t.Fatalf("l2.MaxTimeout %v is not below the client's default deadline %v", l2.MaxTimeout, client.DefaultTimeout)
	}
	for _, c := range []struct {
		timeout string
		ok      bool
	}{{"12s", false}, {"5001ms", false}, {l2.MaxTimeout.String(), true}, {"300ms", true}} {
		var f l2Flags
		cfg, _, err := parse([]string{"-l2", "redis://127.0.0.1:1", "-l2-insecure-no-mac", "-l2-timeout", c.timeout}, io.Discard, &f)
		if err != nil {
			t.Fatal(err)
		}
		err = f.open(t.Context(), &cfg)
		if c.ok && err != nil {
			t.Errorf("-l2-timeout %s: %v", c.timeout, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "-l2-timeout")) {
			t.Errorf("-l2-timeout %s: %v, want a refusal naming it", c.timeout, err)
		}
		if err == nil {
			cfg.L2.Store.Close()
		}
	}
}

// TestL2CoverageWarning: a daemon over a Redis Cluster run with Redis's
// default cluster-require-full-coverage yes says so in its log, naming
// the setting to change (l2.CoverageWarnings), and starts all the same.
func TestL2CoverageWarning(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1, FullCoverage: true})
	var f l2Flags
	cfg, _, err := parse([]string{"-l2", c.URL(), "-l2-insecure-no-mac"}, io.Discard, &f)
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	if err := f.open(t.Context(), &cfg); err != nil {
		t.Fatalf("open: %v", err)
	}
	defer cfg.L2.Store.Close()
	warned := func() int { return strings.Count(log.String(), "cluster-require-full-coverage yes") }
	for deadline := time.Now().Add(30 * time.Second); warned() < len(c.Nodes); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d warnings of cluster-require-full-coverage for %d masters in 30 s; the log:\n%s", warned(), len(c.Nodes), log.String())
		}
	}
	for _, n := range c.Nodes {
		if !strings.Contains(log.String(), n.Addr()+" runs with cluster-require-full-coverage yes") {
			t.Errorf("no warning names master %s; the log:\n%s", n.Addr(), log.String())
		}
	}
}
