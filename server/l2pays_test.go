//go:build linux

package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// slowGet is a Store whose Get and Load wait delay first: an L2 that
// answers, but slower than recomputing.
type slowGet struct {
	l2.Store
	delay atomic.Int64 // nanoseconds
}

func (s *slowGet) Get(ctx context.Context, keys []l1.ObjectKey) [][]byte {
	select {
	case <-time.After(time.Duration(s.delay.Load())):
	case <-ctx.Done():
		return make([][]byte, len(keys))
	}
	return s.Store.Get(ctx, keys)
}

func (s *slowGet) Load(ctx context.Context, keys []l1.ObjectKey, dst [][]byte) []bool {
	select {
	case <-time.After(time.Duration(s.delay.Load())):
	case <-ctx.Done():
		return make([]bool, len(keys))
	}
	return s.Store.Load(ctx, keys, dst)
}

// The break-even tests' figures: sets of 4 keys of 64 KiB, one prefetch
// get a set. A slow get of a set takes 1 s (0.26 MB/s); a fast one, on
// loopback, a few milliseconds (tens of MB/s and up); the break-even
// between, 2 MB/s, 8x above the slow rate.
const (
	paySize    = 64 << 10
	paySet     = 4
	payMinRate = 2e6
	paySlow    = time.Second
)

func payNode(t *testing.T, url string, store func(l2.Store) l2.Store, probe time.Duration) (*l2Node, *server.Server) {
	t.Helper()
	r, err := l2.NewRedis(context.Background(), url, l2.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l2.NewTier(r, l2.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, server.Config{L2: server.L2Config{Store: store(tier), PrefetchBatch: paySet, MinRate: payMinRate, ProbeInterval: probe}})
	return &l2Node{s: s, c: dial(t, s), tier: tier}, s
}

// paySets writes n sets of keys on a and waits until L2 holds them.
func paySets(t *testing.T, a *l2Node, name string, n int) [][]l1.ObjectKey {
	t.Helper()
	sets := make([][]l1.ObjectKey, n)
	for i := range sets {
		sets[i] = l2keys(fmt.Sprintf("%s%d", name, i), paySet)
		a.write(t, sets[i], paySize, 10*i)
	}
	a.waitPuts(t, uint64(n*paySet))
	return sets
}

// slowStoreScenario runs the break-even rule against a store made slow:
// the first lookup (a cold estimate) counts its L2 hits and its prefetch
// measures 0.26 MB/s; the next counts none (every hit is a miss, nothing
// is prefetched, no get is made), and says so in its counts. Once the
// store is fast again, a refused lookup past the probe interval loads its
// set anyway, uncounted, and within a few such probes the estimate counts
// L2 hits again. With bug set, b is the daemon that counts them anyway.
// It returns what broke the rule, or nil.
func slowStoreScenario(t *testing.T, bug bool) error {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	sets := paySets(t, a, "slow", 8)
	var slow *slowGet
	const probe = 2 * time.Second // well past the steps between the sample and the refused lookup
	b, bs := payNode(t, srv.URL(), func(st l2.Store) l2.Store {
		slow = &slowGet{Store: st}
		slow.delay.Store(int64(paySlow))
		return slow
	}, probe)
	if bug {
		server.CountUnpaidL2(bs)
	}
	full := wire.Lookup{N: paySet, L2: paySet, Prefetch: paySet}
	if lk, err := b.c.Lookup(sets[0], true); err != nil || lk != full {
		return fmt.Errorf("the cold lookup: %+v, %v; want %+v", lk, err, full)
	}
	if p := b.readPrefix(t, sets[0], paySize, 0, 5*time.Second); p != paySet {
		return fmt.Errorf("the cold lookup's prefetch read %d", p)
	}
	e := bs.L2Estimate()
	if e.Samples != 1 || e.Rate >= payMinRate || e.Latency < paySlow {
		return fmt.Errorf("after one slow get: estimate %+v", e)
	}
	gets := b.tier.Stats().Hits + b.tier.Stats().Misses
	start := time.Now()
	lk, err := b.c.Lookup(sets[1], true)
	if err != nil {
		return err
	}
	if want := (wire.Lookup{N: paySet}); lk != want {
		return fmt.Errorf("a lookup over a store at %.0f B/s, break-even %.0f: %+v, want %+v (its L2 hits counted as misses)", e.Rate, payMinRate, lk, want)
	}
	if el := time.Since(start); el >= paySlow {
		return fmt.Errorf("the refused lookup took %v: it waited for a get", el)
	}
	if got := b.tier.Stats().Hits + b.tier.Stats().Misses; got != gets {
		return fmt.Errorf("the refused lookup made a get: %d keys got, %d before", got, gets)
	}
	if p := b.readPrefix(t, sets[1], paySize, 10, 0); p != 0 {
		return fmt.Errorf("a refused lookup's keys read a prefix of %d", p)
	}
	if lc := b.s.LookupCounts(); lc.L2Hits != paySet || lc.L2Slow != paySet || lc.Prefetched != paySet || lc.Probes != 0 {
		return fmt.Errorf("lookup counts %+v: want L2Hits %d, L2Slow %d, Prefetched %d, Probes 0", lc, paySet, paySet, paySet)
	}
	check(t, b.s)

	// The store is fast again: probes measure it.
	slow.delay.Store(0)
	for i := 2; ; i++ {
		if i == len(sets) {
			return fmt.Errorf("no lookup counted L2 hits after %d probes of a fast store: estimate %+v", len(sets)-3, bs.L2Estimate())
		}
		time.Sleep(probe + 50*time.Millisecond)
		before := b.s.LookupCounts()
		lk, err := b.c.Lookup(sets[i], true)
		if err != nil {
			return err
		}
		if lk == full {
			break
		}
		if lk != (wire.Lookup{N: paySet}) {
			return fmt.Errorf("lookup %d: %+v", i, lk)
		}
		if lc := b.s.LookupCounts(); lc.Probes != before.Probes+paySet {
			return fmt.Errorf("a refused lookup past the probe interval probed %d keys", lc.Probes-before.Probes)
		}
		// The probe loads behind the answer; a read that waits gets it.
		if p := b.readPrefix(t, sets[i], paySize, 10*i, 5*time.Second); p != paySet {
			return fmt.Errorf("the probe of set %d read %d", i, p)
		}
	}
	check(t, b.s)
	return nil
}

// TestL2SlowStoreNotCounted: see slowStoreScenario.
func TestL2SlowStoreNotCounted(t *testing.T) {
	if err := slowStoreScenario(t, false); err != nil {
		t.Fatal(err)
	}
}

// TestL2BreakEvenBites: against a daemon that counts every L2 hit, paid
// or not, the slow-store scenario fails at the refused lookup.
func TestL2BreakEvenBites(t *testing.T) {
	err := slowStoreScenario(t, true)
	if err == nil || !strings.Contains(err.Error(), "counted as misses") {
		t.Fatalf("the scenario did not catch a daemon that counts unpaid L2 hits: %v", err)
	}
	t.Logf("caught: %v", err)
}

// TestL2FastStoreCounted: over a store on loopback, well above the
// break-even, every L2 hit counts, and none is counted as not paying;
// with a budget no get can meet (1 µs), a lookup counts none of them
// (the budget cuts its header reads, a miss and a cut call; or, were
// they done within it, its counts would say the gets would be late),
// and with a budget of 10 s, all.
func TestL2FastStoreCounted(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	sets := paySets(t, a, "fast", 3)
	b, bs := payNode(t, srv.URL(), func(st l2.Store) l2.Store { return st }, time.Hour)
	full := wire.Lookup{N: paySet, L2: paySet, Prefetch: paySet}
	for i := range 2 {
		if lk, err := b.c.Lookup(sets[i], true); err != nil || lk != full {
			t.Fatalf("lookup %d: %+v, %v; want %+v (estimate %+v)", i, lk, err, full, bs.L2Estimate())
		}
		if p := b.readPrefix(t, sets[i], paySize, 10*i, 5*time.Second); p != paySet {
			t.Fatalf("set %d read %d", i, p)
		}
	}
	e := bs.L2Estimate()
	if e.Samples != 2 || e.Rate < payMinRate {
		t.Fatalf("estimate %+v", e)
	}
	t.Logf("over redis-server on loopback, gets of %d × %d KiB: %.0f MB/s, %v a get", paySet, paySize>>10, e.Rate/1e6, e.Latency)
	if lk, err := b.c.LookupWithin(sets[2], true, time.Microsecond); err != nil || lk != (wire.Lookup{N: paySet}) {
		t.Fatalf("a lookup within 1 µs: %+v, %v (estimate %+v)", lk, err, bs.L2Estimate())
	}
	if lk, err := b.c.LookupWithin(sets[2], true, 10*time.Second); err != nil || lk != full {
		t.Fatalf("a lookup within 10 s: %+v, %v (estimate %+v)", lk, err, bs.L2Estimate())
	}
	if p := b.readPrefix(t, sets[2], paySize, 20, 5*time.Second); p != paySet {
		t.Fatalf("set 2 read %d", p)
	}
	lc := b.s.LookupCounts()
	if lc.L2Hits != 3*paySet || lc.L2Slow != 0 || (lc.L2Late != 0 && lc.L2Late != paySet) || lc.Probes != 0 {
		t.Fatalf("lookup counts %+v", lc)
	}
	if lc.L2Late == 0 && b.tier.Stats().Cut == 0 {
		t.Fatalf("a lookup within 1 µs counted nothing late, and no header read was cut: %+v", b.tier.Stats())
	}
	for _, w := range []time.Duration{-time.Nanosecond, 10*time.Second + time.Microsecond} {
		if _, err := b.c.LookupWithin(sets[0], false, w); err == nil {
			t.Fatalf("a budget of %v accepted", w)
		}
	}
	check(t, b.s)
}

// TestL2ZeroMinRateCountsSlow: with MinRate 0 the rate rule is off: a
// store as slow as slowStoreScenario's is counted.
func TestL2ZeroMinRateCountsSlow(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	a := startL2Node(t, srv.URL(), l2.Options{}, server.Config{})
	sets := paySets(t, a, "zero", 2)
	r, err := l2.NewRedis(context.Background(), srv.URL(), l2.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tier, _ := l2.NewTier(r, l2.Options{})
	slow := &slowGet{Store: tier}
	slow.delay.Store(int64(paySlow))
	bs := start(t, server.Config{L2: server.L2Config{Store: slow, PrefetchBatch: paySet}})
	b := &l2Node{s: bs, c: dial(t, bs), tier: tier}
	full := wire.Lookup{N: paySet, L2: paySet, Prefetch: paySet}
	for i := range sets {
		if lk, err := b.c.Lookup(sets[i], true); err != nil || lk != full {
			t.Fatalf("lookup %d: %+v, %v (estimate %+v)", i, lk, err, bs.L2Estimate())
		}
		if p := b.readPrefix(t, sets[i], paySize, 10*i, 5*time.Second); p != paySet {
			t.Fatalf("set %d read %d", i, p)
		}
	}
	if e := bs.L2Estimate(); e.Samples != 2 || e.Rate >= payMinRate {
		t.Fatalf("estimate %+v, want 2 slow samples", e)
	}
	check(t, b.s)
}
