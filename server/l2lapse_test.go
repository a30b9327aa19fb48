//go:build linux

package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// steppedClock is a manager's clock that a test moves on.
type steppedClock struct{ ns atomic.Int64 }

func (c *steppedClock) now() time.Time       { return time.Unix(0, c.ns.Load()) }
func (c *steppedClock) step(d time.Duration) { c.ns.Add(int64(d)) }

// lapsedCopies writes two batches through a daemon over a real
// redis-server and reports what L2 holds of them: the first batch's
// copies release their read locks in time; the second's lapse (the
// manager's clock stepped past the read TTL between each copy's encode
// and its release: the block could have been evicted and reused while it
// was copied). It returns an error when L2 lacks a value of the first
// batch (the test could not see a put) or holds one of the second.
func lapsedCopies(t *testing.T, bug bool) error {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	clock := &steppedClock{}
	clock.ns.Store(time.Unix(1_000_000, 0).UnixNano())
	const readTTL = time.Second
	n := startL2Node(t, srv.URL(), l2.Options{}, server.Config{L1: l1.Config{ReadTTL: readTTL, WriteTTL: time.Hour, Now: clock.now}})
	if bug {
		server.L2PutSendsLapsed(n.s)
	}
	var lapse atomic.Bool
	server.L2BeforePutRelease(n.s, func() {
		if lapse.Load() {
			clock.step(2 * readTTL)
		}
	})
	settled := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for w := n.s.L2Work(); w.Queued != 0 || w.Reads != 0; w = n.s.L2Work() {
			if time.Now().After(deadline) {
				t.Fatalf("the copies did not end: %+v", w)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	held := func(keys []l1.ObjectKey) int {
		h := 0
		for _, sz := range n.tier.Head(context.Background(), keys) {
			if sz >= 0 {
				h++
			}
		}
		return h
	}
	good := l2keys("in-time", 4)
	n.write(t, good, faultSize, 500)
	settled()
	lapsed := l2keys("lapsed", 4)
	lapse.Store(true)
	n.write(t, lapsed, faultSize, 600)
	settled()
	check(t, n.s)
	hg, hl := held(good), held(lapsed)
	s := n.tier.Stats()
	fmt.Printf("lapsed copies: L2 holds %d of %d values released in time and %d of %d whose read lock lapsed; drops %d\n",
		hg, len(good), hl, len(lapsed), s.Drops)
	switch {
	case hg != len(good):
		return fmt.Errorf("L2 holds %d of %d values copied in time: the test cannot see a put", hg, len(good))
	case hl != 0:
		return fmt.Errorf("L2 holds %d values whose copy's read lock lapsed before its release", hl)
	case s.Drops < uint64(len(lapsed)):
		return fmt.Errorf("%d copies dropped, want the %d whose lock lapsed", s.Drops, len(lapsed))
	}
	return nil
}

// TestL2PutLapsedReadNotSent: an L2 put never sends a value whose read
// lock lapsed before its release; such a copy is dropped and counted.
func TestL2PutLapsedReadNotSent(t *testing.T) {
	if err := lapsedCopies(t, false); err != nil {
		t.Fatal(err)
	}
}

// TestL2PutLapsedReadBites: a daemon whose copies send values whose read
// lock lapsed (server.L2PutSendsLapsed) fails the check above.
func TestL2PutLapsedReadBites(t *testing.T) {
	err := lapsedCopies(t, true)
	if err == nil {
		t.Fatal("a daemon that sends lapsed copies passed")
	}
	t.Logf("caught: %v", err)
}
