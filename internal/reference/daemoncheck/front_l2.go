//go:build linux

package daemoncheck

import (
	"context"
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// FrontL2 is Front with the daemon's L2 tier on, over the real Redis at
// url (a plain redis-server or a cluster's seeds), under a prefix of its
// own, so that many front ends share one Redis without sharing values: the
// third front end. What l1 alone would answer a miss, it may answer from
// L2:
//
//   - every finish is copied to L2 before the call returns (the daemon's
//     copy is asynchronous; the front end waits for it, so that the
//     copy's read lock is never seen by an observation: one put worker,
//     one object a call, so the copies touch the objects in the finish's
//     order);
//   - a read (ReserveRead, ReserveReadPrefix) is an engine's: a lookup
//     with the prefetch flag first, which loads the run of keys past the
//     L1 prefix that L2 holds into blocks of the pool (evicting others
//     when the pool is full and on-demand eviction is on), then the read,
//     after the loads (reserve_read_prefix_wait for the prefix read). A
//     key L1 lost (deleted, evicted) but L2 holds is a hit: the one
//     contract that differs from l1's, which the suites say where they
//     test it.
//
// With an L1 of a few dozen blocks, most reads of a key written a while
// ago are served from L2. Every other call is Front's.
func FrontL2(url string) l1check.Variant {
	return l1check.Variant{Front: func(m *l1.Manager[l1check.Key], a *allocator.Allocator) (l1check.Manager, *allocator.Allocator, func(), error) {
		r, err := l2.NewRedis(context.Background(), url, l2.RedisOptions{})
		if err != nil {
			return nil, nil, nil, err
		}
		tier, err := l2.NewTier(r, l2.Options{Prefix: fmt.Sprintf("kvl2:front%d:", serial.Add(1))})
		if err != nil {
			r.Close()
			return nil, nil, nil, err
		}
		f, fa, closeFront, err := startFront(m, a, server.L2Config{Store: tier, Workers: 1, Batch: 1}, 0)
		if err != nil {
			return nil, nil, nil, err
		}
		return &l2front{front: f}, fa, closeFront, nil
	}}
}

// FrontL2Loads returns how many keys the daemon of a FrontL2 front end
// (the System's M) has loaded from L2, and whether M is one.
func FrontL2Loads(m l1check.Manager) (uint64, bool) {
	f, ok := m.(*l2front)
	if !ok {
		return 0, false
	}
	return f.s.LookupCounts().Loaded, true
}

// l2front is FrontL2's l1check.Manager.
type l2front struct{ *front }

// idle waits until the daemon has copied every finished object and loaded
// every prefetched key.
func (f *l2front) idle() {
	for start := time.Now(); ; time.Sleep(20 * time.Microsecond) {
		w := f.s.L2Work()
		if w.Queued == 0 && w.Loading == 0 {
			return
		}
		if time.Since(start) > time.Minute {
			panic(fmt.Sprintf("daemoncheck: the daemon's L2 tier is not idle after a minute: %+v", w))
		}
	}
}

func (f *l2front) FinishWrite(keys []l1check.Key, leases []l1.Lease) ([]l1.Status, error) {
	defer f.idle()
	return f.front.FinishWrite(keys, leases)
}

func (f *l2front) FinishWriteAndReserveRead(keys []l1check.Key, leases []l1.Lease, locks int) ([]l1.Result, error) {
	defer f.idle()
	return f.front.FinishWriteAndReserveRead(keys, leases, locks)
}

// prefetch is the engine's lookup before a read: nothing for a read the
// daemon would refuse, so that a refused call changes nothing.
func (f *l2front) prefetch(keys []l1check.Key, locks int) error {
	if locks < 1 || locks > l1.MaxReadLocks || len(keys) == 0 {
		return nil
	}
	_, err := f.c.Lookup(frontKeys(keys), true)
	return err
}

func (f *l2front) ReserveRead(keys []l1check.Key, locks int) ([]l1.Result, error) {
	if err := f.prefetch(keys, locks); err != nil {
		return nil, err
	}
	f.idle()
	return f.front.ReserveRead(keys, locks)
}

func (f *l2front) ReserveReadPrefix(keys []l1check.Key, locks int) ([]l1.Result, int, error) {
	if err := f.prefetch(keys, locks); err != nil {
		return nil, 0, err
	}
	rs, n, err := f.c.ReserveReadPrefixWait(frontKeys(keys), locks, wire.MaxWait*time.Microsecond)
	f.idle()
	out, err := results(rs, err)
	return out, n, err
}
