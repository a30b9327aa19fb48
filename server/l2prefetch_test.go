//go:build linux

package server_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// TestL2PrefetchKeysOwnTheirBytes: rounds of write on A, lookup, prefetch
// and read on B serve A's bytes every round. The keys a prefetch reserves
// must not alias the lookup's frame, which the next request overwrites:
// l1 would keep them as its objects' keys.
func TestL2PrefetchKeysOwnTheirBytes(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	cfg := server.Config{PoolSize: 256 << 20}
	a := startL2Node(t, srv.URL(), l2.Options{}, cfg)
	b := startL2Node(t, srv.URL(), l2.Options{}, cfg)
	var f faultCounts
	// A round waits 20 ms for A's puts, which a loaded machine can
	// outlast: go on past the four rounds until B has had L2 hits.
	for r := 1; r <= 4 || f.l2Hits.Load() == 0 && r <= 50; r++ {
		faultRound(a, b, r, &f)
	}
	if f.wrongBytes.Load() != 0 || f.clientErrors.Load() != 0 || f.l2Hits.Load() == 0 {
		t.Fatalf("wrong bytes %d of %d L2 hits, client errors %d", f.wrongBytes.Load(), f.l2Hits.Load(), f.clientErrors.Load())
	}
	check(t, a.s)
	check(t, b.s)
}

// loadCounter is an l2.Store that records how many keys each Load carried.
type loadCounter struct {
	l2.Store
	mu    sync.Mutex
	loads []int
}

func (s *loadCounter) Load(ctx context.Context, keys []l1.ObjectKey, dst [][]byte) []bool {
	s.mu.Lock()
	s.loads = append(s.loads, len(keys))
	s.mu.Unlock()
	return s.Store.Load(ctx, keys, dst)
}

// TestL2PrefetchGetsBySize: a prefetch of small objects is not fetched a
// few keys at a time: its gets take PrefetchBatch keys and more while
// their payloads fit PrefetchBytes (by default 64 MiB: 200 objects of
// 16 KiB in one get); with PrefetchBytes 1 a get carries PrefetchBatch
// keys alone. Every byte read back is A's either way.
func TestL2PrefetchGetsBySize(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	const n, size = 200, 16 << 10
	ks := l2keys("bysize", n)
	a.write(t, ks[:n/2], size, 0)
	a.write(t, ks[n/2:], size, n/2)
	a.waitPuts(t, n)
	for _, c := range []struct {
		bytes int64
		loads []int
	}{
		{0, []int{200}},
		{1, []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}},
	} {
		r, err := l2.NewRedis(context.Background(), srv.URL(), l2.RedisOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tier, err := l2.NewTier(r, l2.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lc := &loadCounter{Store: tier}
		bs := start(t, server.Config{L2: server.L2Config{Store: lc, PrefetchBytes: c.bytes}})
		b := &l2Node{s: bs, c: dial(t, bs), tier: tier}
		if lk, err := b.c.Lookup(ks, true); err != nil || lk != (wire.Lookup{N: n, L2: n, Prefetch: n}) {
			t.Fatalf("PrefetchBytes %d: lookup %+v, %v", c.bytes, lk, err)
		}
		if p := b.readPrefix(t, ks, size, 0, 10*time.Second); p != n {
			t.Fatalf("PrefetchBytes %d: read %d of %d", c.bytes, p, n)
		}
		lc.mu.Lock()
		loads := slices.Clone(lc.loads)
		lc.mu.Unlock()
		if !slices.Equal(loads, c.loads) {
			t.Errorf("PrefetchBytes %d: gets of %v keys, want %v", c.bytes, loads, c.loads)
		}
		check(t, bs)
	}
}
