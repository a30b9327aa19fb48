//go:build linux

package server_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// faultCounts are what the fault test counts across its workload.
type faultCounts struct {
	rounds, l2Hits, clientErrors, wrongBytes atomic.Int64
	firstErr                                 atomic.Value
}

func (f *faultCounts) clientError(err error) {
	f.clientErrors.Add(1)
	f.firstErr.CompareAndSwap(nil, err.Error())
}

const faultSize = 16 << 10

// faultRound writes a fresh batch on a, then reads it through b's lookup,
// prefetch and prefix read, counting every client error and every wrong
// byte instead of failing: the faults make misses, and must make nothing
// else.
func faultRound(a, b *l2Node, r int, f *faultCounts) {
	keys := l2keys(fmt.Sprintf("round%d", r), 6)
	seed := r * 100
	res, err := a.c.ReserveWrite(keys, nil, faultSize, l1.ModeAll)
	if err != nil {
		f.clientError(err)
		return
	}
	var ok []l1.ObjectKey
	var okLeases = leasesOf(res)[:0]
	for i, x := range res {
		if x.Status != 0 {
			continue
		}
		bs, err := a.c.Bytes(x.Block)
		if err != nil {
			f.clientError(err)
			return
		}
		l2stamp(bs[:faultSize], seed+i)
		ok = append(ok, keys[i])
		okLeases = append(okLeases, x.Lease)
	}
	if _, err := a.c.FinishWrite(ok, okLeases); err != nil {
		f.clientError(err)
		return
	}
	time.Sleep(20 * time.Millisecond) // let the puts go out
	if _, err := b.c.Lookup(keys, true); err != nil {
		f.clientError(err)
		return
	}
	rr, p, err := b.c.ReserveReadPrefixWait(keys, 1, 500*time.Millisecond)
	if err != nil {
		f.clientError(err)
		return
	}
	want := make([]byte, faultSize)
	for i := range p {
		bs, err := b.c.Bytes(rr[i].Block)
		if err != nil {
			f.clientError(err)
			return
		}
		l2stamp(want, seed+i)
		if !bytes.Equal(bs[:faultSize], want) {
			f.wrongBytes.Add(1)
		}
	}
	f.l2Hits.Add(int64(p))
	if _, err := b.c.FinishRead(keys[:p], leasesOf(rr[:p]), 1); err != nil {
		f.clientError(err)
	}
	f.rounds.Add(1)
}

// inL2 reports whether every key is in tier's store within wait.
func inL2(ctx context.Context, tier *l2.Tier, keys []l1.ObjectKey, wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for {
		whole := true
		for _, sz := range tier.Head(ctx, keys) {
			whole = whole && sz >= 0
		}
		if whole {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settle waits until neither daemon holds a lock (prefetches and puts
// done), then checks both; it returns the stuck locks left after 10 s.
func settle(t *testing.T, nodes ...*l2Node) int {
	t.Helper()
	stuck := 0
	for _, n := range nodes {
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := n.s.Verify()
			if len(r.Errors) > 0 {
				t.Fatalf("Check: %v", r.Errors)
			}
			if r.WriteLocked == 0 && r.ReadLocks == 0 {
				break
			}
			if time.Now().After(deadline) {
				stuck += r.WriteLocked + int(r.ReadLocks)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return stuck
}

// TestL2ClusterFaults runs two daemons over a real Redis Cluster (3
// masters, 3 replicas) under a steady workload (one node writes, the other
// reads it through L2) while a master is SIGSTOPped past every timeout
// (and failed over), a master is SIGKILLed (and failed over), and values
// are corrupted in Redis directly. It counts client errors caused by L2,
// wrong bytes served, blocks leaked and locks left stuck, which must all
// be 0; the breaker must open during the faults and be closed after; the
// corrupted values must be misses, counted. It prints the counts.
func TestL2ClusterFaults(t *testing.T) {
	c := rediscluster.New(t, rediscluster.Options{NodeTimeout: time.Second})
	opts := l2.Options{Timeout: 300 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: 300 * time.Millisecond}
	cfg := server.Config{PoolSize: 256 << 20}
	a := startL2Node(t, c.URL(), opts, cfg)
	b := startL2Node(t, c.URL(), opts, cfg)
	ctx := context.Background()

	var f faultCounts
	var stop atomic.Bool
	var wg sync.WaitGroup
	round := atomic.Int64{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			faultRound(a, b, int(round.Add(1)), &f)
		}
	}()
	phase := func(name string, fault func()) {
		t.Helper()
		before := f.l2Hits.Load()
		opens := b.tier.Stats().BreakerOpens + a.tier.Stats().BreakerOpens
		fault()
		wctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		if err := c.WaitReady(wctx); err != nil {
			t.Fatalf("%s: the cluster did not recover: %v", name, err)
		}
		// Recovered: reads come from L2 again.
		deadline := time.Now().Add(20 * time.Second)
		mark := f.l2Hits.Load()
		for f.l2Hits.Load() < mark+12 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no L2 hits after recovery (%+v)", name, b.tier.Stats())
			}
			time.Sleep(20 * time.Millisecond)
		}
		check(t, a.s)
		check(t, b.s)
		t.Logf("%s: L2 hits %d during and after, breaker opened %d times", name, f.l2Hits.Load()-before,
			b.tier.Stats().BreakerOpens+a.tier.Stats().BreakerOpens-opens)
	}

	time.Sleep(300 * time.Millisecond)
	phase("master stopped", func() {
		victim := firstMaster(t, c)
		if err := victim.Stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond) // past the tier's timeout and the cluster's node timeout
		if err := victim.Cont(); err != nil {
			t.Fatal(err)
		}
	})
	opensStopped := a.tier.Stats().BreakerOpens + b.tier.Stats().BreakerOpens
	phase("master killed", func() {
		victim := firstMaster(t, c)
		if err := victim.Kill(); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 40*time.Second)
		defer cancel()
		if err := c.WaitReady(wctx); err != nil {
			t.Fatalf("no failover: %v", err)
		}
		if err := victim.Restart(ctx); err != nil {
			t.Fatal(err)
		}
	})
	stop.Store(true)
	wg.Wait()

	// Values corrupted in Redis directly: a fresh batch from a, each
	// value's payload changed, read by b: every one a miss, counted.
	// A put may still fail just after the failover (a stale slot map, the
	// breaker half-open): such a batch is a miss, as it should be, so the
	// test writes fresh batches until one is whole in L2.
	var keys []l1.ObjectKey
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatalf("no corrupt batch reached L2 in %d attempts (%+v)", attempt, a.tier.Stats())
		}
		keys = l2keys(fmt.Sprintf("corrupt-batch%d", attempt), 6)
		a.write(t, keys, faultSize, 9000)
		if inL2(ctx, b.tier, keys, 5*time.Second) {
			break
		}
	}
	cc := c.Client()
	defer cc.Close()
	for i := range keys {
		name := l2.StoreKey(l2.DefaultPrefix, &keys[i])
		if err := cc.SetRange(ctx, name, int64(l2.PrefixLen(&keys[i])+i*1000), "\x5a\xa5").Err(); err != nil {
			t.Fatal(err)
		}
	}
	corruptBefore := b.tier.Stats().Corrupt
	if _, err := b.c.Lookup(keys, true); err != nil {
		f.clientError(err)
	}
	if p := b.readPrefix(t, keys, faultSize, 9000, 2*time.Second); p != 0 {
		t.Fatalf("a corrupted value was served: prefix %d", p)
	}
	corrupt := b.tier.Stats().Corrupt - corruptBefore

	stuck := settle(t, a, b)
	leaked := int64(0)
	for _, n := range []*l2Node{a, b} {
		n.s.Manager().Clear(false)
		if r := n.s.Verify(); r.UsedBytes != 0 || len(r.Errors) > 0 {
			leaked += r.UsedBytes
			t.Errorf("after clearing: %d bytes used, %v", r.UsedBytes, r.Errors)
		}
	}
	// The breaker closes once the cluster answers again.
	for _, n := range []*l2Node{a, b} {
		deadline := time.Now().Add(10 * time.Second)
		for n.tier.Stats().Breaker != l2.Closed {
			n.tier.Head(ctx, keys[:1])
			if time.Now().After(deadline) {
				t.Fatalf("breaker %v after recovery (%+v)", n.tier.Stats().Breaker, n.tier.Stats().Servers)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	as, bst := a.tier.Stats(), b.tier.Stats()
	fmt.Printf("l2 faults: %d rounds, %d L2 hits; client errors %d, wrong bytes %d, leaked bytes %d, stuck locks %d; "+
		"breaker opens %d (stopped master %d), now %v/%v; corrupted values %d of %d missed and deleted; "+
		"L2 errors %d, skipped %d, drops %d\n",
		f.rounds.Load(), f.l2Hits.Load(), f.clientErrors.Load(), f.wrongBytes.Load(), leaked, stuck,
		as.BreakerOpens+bst.BreakerOpens, opensStopped, as.Breaker, bst.Breaker, corrupt, len(keys),
		as.Errors+bst.Errors, as.Skipped+bst.Skipped, as.Drops+bst.Drops)
	if f.clientErrors.Load() != 0 {
		t.Errorf("client errors: %d (first: %v)", f.clientErrors.Load(), f.firstErr.Load())
	}
	if f.wrongBytes.Load() != 0 || stuck != 0 || leaked != 0 {
		t.Errorf("wrong bytes %d, stuck locks %d, leaked bytes %d", f.wrongBytes.Load(), stuck, leaked)
	}
	if opensStopped == 0 {
		t.Error("the breaker never opened while a master was stopped")
	}
	if corrupt != uint64(len(keys)) {
		t.Errorf("%d corrupt values counted, want %d", corrupt, len(keys))
	}
}
