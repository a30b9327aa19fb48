//go:build linux

package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// TestL2NoEviction: a real redis-server at maxmemory under noeviction
// refuses every put (OOM) while it still serves reads. The writing daemon
// counts each refused copy (a put failure, or a drop once its breaker
// opened), releases every lock its copies took, and goes on serving its
// own objects from L1; the reading daemon is served the values stored
// before, byte for byte; once Redis has room again, copies are stored.
// After it, neither daemon holds a lock or a byte it should not.
func TestL2NoEviction(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	opts := l2.Options{Timeout: 2 * time.Second, BreakerFailures: 3, BreakerCooldown: 200 * time.Millisecond}
	a := startL2Node(t, srv.URL(), opts, server.Config{})
	b := startL2Node(t, srv.URL(), opts, server.Config{})
	ctx := context.Background()
	before := l2keys("oom-before", 8)
	a.write(t, before, faultSize, 700)
	if !inL2(ctx, b.tier, before, 20*time.Second) {
		t.Fatalf("the keys did not reach L2: %+v", a.tier.Stats())
	}
	rc := srv.Client()
	defer rc.Close()
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // below what it holds: every write is refused
		t.Fatal(err)
	}
	s0 := a.tier.Stats()
	const batches = 4
	for r := range batches {
		keys := l2keys(fmt.Sprintf("oom-during%d", r), 8)
		a.write(t, keys, faultSize, 800+100*r)
		// a serves its own objects from L1 while its copies are refused.
		if p := a.readPrefix(t, keys, faultSize, 800+100*r, 0); p != len(keys) {
			t.Fatalf("the writer served %d of %d of its own keys while Redis refused puts", p, len(keys))
		}
	}
	stuck := settle(t, a, b)
	s1 := a.tier.Stats()
	refused := (s1.PutFailures - s0.PutFailures) + (s1.Drops - s0.Drops)
	// b is served what Redis held before, byte for byte.
	if _, err := b.c.Lookup(before, true); err != nil {
		t.Fatalf("a lookup while Redis refused writes: %v", err)
	}
	served := b.readPrefix(t, before, faultSize, 700, 5*time.Second)
	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	after := l2keys("oom-after", 8)
	back := false
	for r := 0; !back && r < 50; r++ { // the writer's breaker may be open a cooldown
		after = l2keys(fmt.Sprintf("oom-after%d", r), 8)
		a.write(t, after, faultSize, 2000)
		back = inL2(ctx, b.tier, after, 200*time.Millisecond)
	}
	stuck += settle(t, a, b)
	var leaked int64
	for _, n := range []*l2Node{a, b} {
		n.s.Manager().Clear(false)
		if r := n.s.Verify(); r.UsedBytes != 0 || len(r.Errors) > 0 {
			leaked += r.UsedBytes
			t.Errorf("after clearing: %d bytes used, %v", r.UsedBytes, r.Errors)
		}
	}
	fmt.Printf("noeviction: %d copies refused by Redis at maxmemory of %d written (put failures %d, drops %d, stored %d), "+
		"writer's breaker opened %d times; reader served %d of %d stored before; copies stored again after: %v; "+
		"stuck locks %d, leaked bytes %d\n",
		refused, batches*8, s1.PutFailures-s0.PutFailures, s1.Drops-s0.Drops, s1.Puts-s0.Puts, s1.BreakerOpens-s0.BreakerOpens,
		served, len(before), back, stuck, leaked)
	if s1.Puts != s0.Puts || refused != batches*8 {
		t.Errorf("of %d copies refused by Redis, %d counted as refused and %d as stored", batches*8, refused, s1.Puts-s0.Puts)
	}
	if served != len(before) {
		t.Errorf("the reader was served %d of %d values stored before the OOM", served, len(before))
	}
	if !back {
		t.Errorf("copies not stored once Redis had room again: %+v", a.tier.Stats())
	}
	if stuck != 0 || leaked != 0 {
		t.Errorf("stuck locks %d, leaked bytes %d", stuck, leaked)
	}
}
