//go:build linux

package server_test

import (
	"testing"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
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
