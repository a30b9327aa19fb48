package l1_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// TestThreadSafety is LMCache's TestThreadSafety, by subtest name; run it
// with -race.
func TestThreadSafety(t *testing.T) {
	const workers = 8
	t.Run("concurrent_reserve_write_different_keys", func(t *testing.T) {
		e := newEnv(t, workers*50*obj, l1.Config{})
		var wg sync.WaitGroup
		blocks := make([][]l1.Result, workers)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rs, err := e.m.ReserveWrite(keys(w*50, 50), nil, obj, l1.ModeAll)
				if assert.NoError(t, err) {
					blocks[w] = rs
				}
			}()
		}
		wg.Wait()
		seen := map[allocator.Block]bool{}
		for _, rs := range blocks {
			for _, r := range rs {
				require.Equal(t, l1.OK, r.Status)
				require.False(t, seen[r.Block])
				seen[r.Block] = true
			}
		}
		assert.Equal(t, workers*50*obj, e.used())
	})
	t.Run("concurrent_read_same_key", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					rs, err := e.m.ReserveRead([]int{1}, 1)
					if !assert.NoError(t, err) || !assert.Equal(t, w[0].Block, rs[0].Block) {
						return
					}
					st, err := e.fr([]int{1}, 1)
					assert.NoError(t, err)
					assert.Equal(t, []l1.Status{l1.OK}, st)
				}
			}()
		}
		wg.Wait()
		assert.Zero(t, e.state(t, 1).ReadLocks)
	})
	t.Run("concurrent_unsafe_read_same_key", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		r := e.read(t, []int{1}, 1)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					rs := e.unsafeRead([]int{1})
					assert.Equal(t, []l1.Result{{Status: l1.OK, Block: w[0].Block, Lease: r[0].Lease}}, rs)
				}
			}()
		}
		wg.Wait()
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
	})
	t.Run("concurrent_read_write_mixed_operations", func(t *testing.T) {
		for _, s := range baseline.Strategies {
			t.Run(s.String(), func(t *testing.T) { mixedOperations(t, s) })
		}
	})
}

// mixedOperations runs random operations on a small key space from several
// goroutines, with on-demand eviction, a listener that calls back, and a
// reader of every accessor; then checks that no block leaked.
func mixedOperations(t *testing.T, s baseline.Strategy) {
	const workers, ops, keySpace = 6, 300, 48
	e := newStrategyEnv(t, 32*obj, s, l1.Config{EvictOnDemand: true})
	var events atomic.Int64
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		events.Add(int64(len(ev.Keys)))
		if ev.Kind == l1.EventRemoved {
			e.m.IsEvictable(ev.Keys[0])
		}
	})
	var stop atomic.Bool
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for !stop.Load() {
			e.m.Snapshot()
			e.m.Stats()
			e.m.Usage()
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				n := 1 + rng.IntN(6)
				ks := make([]int, n)
				for i := range ks {
					ks[i] = rng.IntN(keySpace)
				}
				var err error
				switch rng.IntN(9) {
				case 0, 1:
					temp := make([]bool, n)
					for i := range temp {
						temp[i] = rng.IntN(4) == 0
					}
					_, err = e.m.ReserveWrite(ks, temp, int64(1+rng.IntN(2))*obj, l1.Modes[rng.IntN(3)])
				case 2:
					e.finish(ks)
				case 3:
					_, err = e.fwrr(ks, 1+rng.IntN(3))
				case 4:
					_, err = e.m.ReserveRead(ks, 1+rng.IntN(3))
				case 5:
					_, err = e.fr(ks, 1+rng.IntN(3))
				case 6:
					e.unsafeRead(ks)
					e.touch(ks)
				case 7:
					e.del(ks, rng.IntN(8) == 0)
				case 8:
					if rng.IntN(4) == 0 {
						e.abort(ks)
					} else {
						_, err = e.m.EvictTo(0.5)
					}
				}
				if err != nil {
					assert.NoError(t, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()

	// Every live block belongs to exactly one object, or is held for the
	// holder of a lock on a key deleted with force.
	snap := e.m.Snapshot()
	var bytes int64
	seen := map[int64]bool{}
	for _, en := range snap {
		require.False(t, seen[en.Block.Offset])
		seen[en.Block.Offset] = true
		bytes += en.Block.Size
	}
	st := e.m.Stats()
	assert.Equal(t, bytes+st.QuarantinedBytes, e.used())
	assert.Equal(t, int64(len(snap)+st.QuarantinedObjects), e.a.Stats().LiveBlocks)
	require.NoError(t, e.a.Verify())
	// With everything deleted, Usage reports 0; after Close the allocator
	// is one free extent again.
	e.del(keys(0, keySpace), true)
	used, _ := e.m.Usage()
	assert.Zero(t, used)
	assert.Zero(t, e.m.Len())
	assert.Zero(t, e.m.Stats().FreeErrors)
	require.NoError(t, e.m.Close())
	assert.Zero(t, e.used())
	assert.Len(t, e.a.FreeExtents(), 1)
	assert.Positive(t, events.Load())
}

// Usage never sees a binary-search probe's blocks, which are allocated and
// freed inside one ReserveWrite.
// From LMCache, whose usage and evictability reads skipped the lock.
func TestReadsTakeTheLock(t *testing.T) {
	e := newStrategyEnv(t, 64*KiB, baseline.BinarySearch, l1.Config{})
	var stop atomic.Bool
	var wg sync.WaitGroup
	bad := atomic.Int64{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			// Consistent states: empty, or the 16-page grant.
			if used, _ := e.m.Usage(); used != 0 && used != 64*KiB {
				bad.Store(used)
			}
			e.m.IsEvictable(0)
			e.m.Stats()
		}
	}()
	for range 200 {
		rs := e.reserve(t, keys(0, 20), obj) // probes 10, 15, 17, 16
		require.Equal(t, l1.OK, rs[15].Status)
		sts, err := e.m.AbortWrite(keys(0, 16), leasesOf(rs[:16]))
		require.NoError(t, err)
		require.Equal(t, repeat(l1.OK, 16), sts)
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load(), "Usage saw a probe")
	assert.Equal(t, uint64(800), e.probes())
}
