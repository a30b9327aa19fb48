//go:build linux

package server_test

import (
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// TestL2PiecesShareAcrossNodes: with the tier in pieces over a real
// cluster, what node A finishes goes out from A's pool in pieces over
// every master, and node B's lookup, prefetch and prefix read serve A's
// exact bytes, loaded piece by piece into B's blocks; both daemons'
// ledgers agree with l1 throughout (Check).
func TestL2PiecesShareAcrossNodes(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{Replicas: -1})
	opts := l2.Options{PieceSize: 16 << 10}
	a := startL2Node(t, c.URL(), opts, server.Config{})
	b := startL2Node(t, c.URL(), opts, server.Config{})
	const size = 64<<10 + 100 // 5 pieces, the last of 100 bytes
	keys := l2keys("pieces", 12)
	a.write(t, keys[:10], size, 11)
	a.waitPuts(t, 10)
	check(t, a.s)
	if w := a.s.L2Work(); w.Reads != 0 {
		t.Fatalf("A holds %d read locks after its puts", w.Reads)
	}
	lk, err := b.c.Lookup(keys, true)
	if err != nil || lk != (wire.Lookup{N: 12, L1: 0, L2: 10, Prefetch: 10}) {
		t.Fatalf("lookup with prefetch: %+v, %v", lk, err)
	}
	check(t, b.s)
	if p := b.readPrefix(t, keys, size, 11, 10*time.Second); p != 10 {
		t.Fatalf("B read a prefix of %d, want 10 (%+v)", p, b.tier.Stats())
	}
	check(t, a.s)
	check(t, b.s)
	if s := b.tier.Stats(); s.Hits != 10 || s.Corrupt != 0 || s.Partial != 0 {
		t.Fatalf("B's tier: %+v", s)
	}
	ms, err := c.Masters(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if n, err := m.Client().DBSize(t.Context()).Result(); err != nil || n < 5 {
			t.Fatalf("master %s holds %d pieces (%v) of 50", m.Addr(), n, err)
		}
	}
}
