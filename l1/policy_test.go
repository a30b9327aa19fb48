package l1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// evicted returns the keys the events removed by eviction, in order.
func evicted(evs []l1.Event[int]) []int {
	var out []int
	for _, e := range evs {
		if e.Kind == l1.EventRemoved && e.Cause == l1.CauseEvicted {
			out = append(out, e.Keys...)
		}
	}
	return out
}

// evictAll empties the manager with EvictTo(0) and returns the victims in
// eviction order.
func (e *env) evictAll(t *testing.T) []int {
	t.Helper()
	e.rec.take()
	_, err := e.m.EvictTo(0)
	require.NoError(t, err)
	return evicted(e.rec.take())
}

func TestEvictionPolicyNames(t *testing.T) {
	for _, p := range l1.EvictionPolicies {
		b, err := p.MarshalText()
		require.NoError(t, err)
		var q l1.EvictionPolicy
		require.NoError(t, q.UnmarshalText(b))
		assert.Equal(t, p, q)
	}
	_, err := l1.ParseEvictionPolicy("arc")
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
	_, err = l1.EvictionPolicy(9).MarshalText()
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.Equal(t, "EvictionPolicy(9)", l1.EvictionPolicy(9).String())
	_, err = l1.New[int](newAlloc(t, 16*obj, obj), l1.Config{Eviction: 9})
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
}

// request runs the request flow of a serving engine over e: read-lock the
// cached prefix, write the missing blocks, finish them, release the prefix.
// chain holds the prompt's keys in order; the first hit keys are cached.
func (e *env) request(t *testing.T, chain []int, hit int, positions bool) {
	t.Helper()
	if hit > 0 {
		rs := e.read(t, chain[:hit], 1)
		require.Equal(t, repeat(l1.OK, hit), statuses(rs))
	}
	miss := chain[hit:]
	var pos []uint32
	if positions {
		for i := range miss {
			pos = append(pos, uint32(hit+i))
		}
	}
	rs, err := e.m.ReserveWriteChain(miss, pos, nil, obj, l1.ModeNew)
	require.NoError(t, err)
	require.Equal(t, repeat(l1.OK, len(miss)), statuses(rs))
	require.Equal(t, repeat(l1.OK, len(miss)), e.finish(miss))
	if hit > 0 {
		require.Equal(t, repeat(l1.OK, hit), e.finishRead(t, chain[:hit], 1))
	}
}

func TestEvictLRUOrder(t *testing.T) {
	e := newEnv(t, 16*obj, l1.Config{Eviction: l1.EvictLRU})
	e.put(t, keys(0, 6), obj)
	e.touch([]int{2})
	e.read(t, []int{0}, 1) // locked: skipped
	e.finishRead(t, []int{0}, 1)
	// 1, 3, 4, 5 by age, then 2 (touched), then 0 (released last).
	assert.Equal(t, []int{1, 3, 4, 5, 2, 0}, e.evictAll(t))

	// A request: LRU leaves the head of each part colder than its tail.
	e.request(t, keys(10, 3), 0, false)
	e.request(t, append(keys(10, 3), keys(13, 2)...), 3, false)
	assert.Equal(t, []int{13, 14, 10, 11, 12}, e.evictAll(t), "LRU evicts heads first")
}

func TestEvictPrefixTailFirst(t *testing.T) {
	for _, positions := range []bool{false, true} {
		name := "call_order"
		if positions {
			name = "positions"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, 32*obj, l1.Config{Eviction: l1.EvictPrefix})
			// Turn 1 writes a chain of 3; turn 2 reads it and adds 2.
			e.request(t, keys(10, 3), 0, positions)
			e.request(t, append(keys(10, 3), keys(13, 2)...), 3, positions)
			// Another conversation, later.
			e.request(t, keys(20, 2), 0, positions)
			assert.Equal(t, []int{14, 13, 12, 11, 10, 21, 20}, e.evictAll(t))
		})
	}
	t.Run("positions_rank_keys_named_out_of_order", func(t *testing.T) {
		e := newEnv(t, 32*obj, l1.Config{Eviction: l1.EvictPrefix})
		ks := []int{3, 0, 4, 1, 2, 5}
		rs, err := e.m.ReserveWriteChain(ks, []uint32{3, 0, 4, 1, 2, 5}, nil, obj, l1.ModeAll)
		require.NoError(t, err)
		require.Equal(t, repeat(l1.OK, 6), statuses(rs))
		require.Equal(t, repeat(l1.OK, 6), e.finish(ks))
		assert.Equal(t, []int{5, 4, 3, 2, 1, 0}, e.evictAll(t))
		// Falling positions, and ties (later keys first).
		ks = []int{9, 8, 7, 6, 16, 17}
		rs, err = e.m.ReserveWriteChain(ks, []uint32{9, 8, 7, 6, 6, 6}, nil, obj, l1.ModeAll)
		require.NoError(t, err)
		require.Equal(t, repeat(l1.OK, 6), statuses(rs))
		require.Equal(t, repeat(l1.OK, 6), e.finish(ks))
		assert.Equal(t, []int{9, 8, 7, 17, 16, 6}, e.evictAll(t))
	})
	t.Run("chain_major_batch", func(t *testing.T) {
		// A store batch of 40 chains of 40 keys, chain after chain
		// (positions 0..39 each time), one FinishWrite: every chain's
		// tail goes first, the last chain's first, then every
		// position 38, and so on to the heads. Past 32 keys the
		// ranking is a radix sort.
		const chains, n = 40, 40
		e := newEnv(t, chains*n*obj, l1.Config{Eviction: l1.EvictPrefix})
		var ks []int
		var pos []uint32
		for c := range chains {
			for p := range n {
				ks, pos = append(ks, c*n+p), append(pos, uint32(p))
			}
		}
		rs, err := e.m.ReserveWriteChain(ks, pos, nil, obj, l1.ModeAll)
		require.NoError(t, err)
		require.Equal(t, repeat(l1.OK, len(ks)), statuses(rs))
		require.Equal(t, repeat(l1.OK, len(ks)), e.finish(ks))
		var want []int
		for p := n - 1; p >= 0; p-- {
			for c := chains - 1; c >= 0; c-- {
				want = append(want, c*n+p)
			}
		}
		assert.Equal(t, want, e.evictAll(t))
	})
	t.Run("on_demand_evicts_the_old_chain_tail_first", func(t *testing.T) {
		a := newAlloc(t, 8*obj, obj)
		e := newEnvOver(t, a, a, l1.Config{Eviction: l1.EvictPrefix, EvictOnDemand: true})
		e.request(t, keys(10, 6), 0, true)
		e.rec.take()
		rs := e.reserve(t, keys(0, 4), obj)
		assert.Equal(t, repeat(l1.OK, 4), statuses(rs))
		assert.Equal(t, []int{15, 14}, evicted(e.rec.take()))
		for _, k := range keys(10, 4) {
			_, ok := e.m.State(k)
			assert.True(t, ok, "head %d evicted", k)
		}
	})
	t.Run("bad_positions_change_nothing", func(t *testing.T) {
		e := newEnv(t, 8*obj, l1.Config{Eviction: l1.EvictPrefix})
		_, err := e.m.ReserveWriteChain(keys(0, 3), []uint32{0, 1}, nil, obj, l1.ModeAll)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		assert.Zero(t, e.m.Len())
	})
}

func TestEvictS3FIFO(t *testing.T) {
	// A pool of 100 pages: the small queue is 10 of them.
	newS3 := func(t *testing.T) *env {
		return newEnv(t, 100*obj, l1.Config{Eviction: l1.EvictS3FIFO})
	}
	hit := func(t *testing.T, e *env, ks []int) {
		require.Equal(t, repeat(l1.OK, len(ks)), statuses(e.read(t, ks, 1)))
		require.Equal(t, repeat(l1.OK, len(ks)), e.finishRead(t, ks, 1))
	}
	evict := func(t *testing.T, e *env, n int) []int {
		t.Helper()
		e.rec.take()
		used, capacity := e.m.Usage()
		_, err := e.m.EvictTo(float64(used-int64(n)*obj) / float64(capacity))
		require.NoError(t, err)
		return evicted(e.rec.take())
	}
	t.Run("one_hit_wonders_leave_from_the_small_queue", func(t *testing.T) {
		e := newS3(t)
		e.put(t, keys(0, 20), obj)
		hit(t, e, keys(0, 5)) // used again: re-enter the small queue at its tail
		// 5-14, used once, leave in FIFO order.
		assert.Equal(t, keys(5, 10), evict(t, e, 10))
		// Then 15-19; 0-4, used, move to main when they reach the front,
		// and main goes once the small queue is under its tenth.
		assert.Equal(t, keys(15, 5), evict(t, e, 5))
		assert.Equal(t, keys(0, 5), evict(t, e, 5))
	})
	t.Run("ghost_hits_go_to_main", func(t *testing.T) {
		e := newS3(t)
		e.put(t, keys(0, 20), obj)
		assert.Equal(t, keys(0, 10), evict(t, e, 10)) // 0-9 to the ghost queue
		e.put(t, []int{3}, obj)                       // a ghost hit: main
		e.put(t, []int{50}, obj)                      // not one: small
		e.put(t, keys(100, 10), obj)                  // small: 10-19, 50, 100-109
		// The small queue is over its tenth: it goes first, all of it but
		// what is under the target, and 3 waits in main.
		assert.Equal(t, append(append(keys(10, 10), 50), keys(100, 1)...), evict(t, e, 12))
		assert.Equal(t, []int{3}, evict(t, e, 1), "main goes once the small queue is under its tenth")
	})
	t.Run("promoted_stays_in_main_after_a_lock", func(t *testing.T) {
		// 0 is touched while at the front of the small queue (a use that
		// takes no lock, so it keeps its place); the first eviction
		// promotes it to main and takes 1. Then 0 is read-locked and
		// released, twice: it re-enters main, at its tail, not the small
		// queue. The small queue goes first while over its tenth (2-90),
		// then 0 from main, then what is left of the small queue.
		e := newS3(t)
		e.put(t, keys(0, 100), obj)
		e.touch([]int{0})
		assert.Equal(t, []int{1}, evict(t, e, 1))
		for _, locks := range []int{1, 3} {
			require.Equal(t, []l1.Status{l1.OK}, statuses(e.read(t, []int{0}, locks)))
			require.Equal(t, []l1.Status{l1.OK}, e.finishRead(t, []int{0}, locks))
		}
		assert.Equal(t, keys(2, 89), evict(t, e, 89))
		assert.Equal(t, append([]int{0}, keys(91, 9)...), evict(t, e, 10))
	})
	t.Run("scan_resistance", func(t *testing.T) {
		// A working set of 40 objects read again and again, and a scan of
		// 2000 keys read once, through a pool of 100 with on-demand
		// eviction: S3-FIFO keeps the working set, LRU does not.
		hits := map[l1.EvictionPolicy]int{}
		for _, p := range []l1.EvictionPolicy{l1.EvictLRU, l1.EvictS3FIFO} {
			e := newEnv(t, 100*obj, l1.Config{Eviction: p, EvictOnDemand: true})
			working := keys(0, 40)
			e.put(t, working, obj)
			scan := 1000
			for round := 0; round < 20; round++ {
				for _, k := range working {
					if st, ok := e.m.State(k); ok && st.Finished {
						hit(t, e, []int{k})
						hits[p]++
					} else {
						e.put(t, []int{k}, obj)
					}
				}
				for range 100 { // a one-hit scan of a pool's worth
					e.put(t, []int{scan}, obj)
					scan++
				}
			}
		}
		t.Logf("working-set hits of 800: LRU %d, S3-FIFO %d", hits[l1.EvictLRU], hits[l1.EvictS3FIFO])
		assert.Greater(t, hits[l1.EvictS3FIFO], 700)
		assert.Less(t, hits[l1.EvictLRU], 100)
	})
}

// TestEvictCountsMergedRuns: on-demand eviction stops at the first victim
// that makes the batch fit, counting what the victims' blocks hold once
// merged with each other and with free neighbours.
func TestEvictCountsMergedRuns(t *testing.T) {
	a := newAlloc(t, 16*obj, obj)
	e := newEnvOver(t, a, a, l1.Config{EvictOnDemand: true})
	e.put(t, keys(0, 16), obj)
	// Coldest first: 0, 2, 4, 1, then the rest. A 3-page object
	// fits only once 1 joins 0 and 2: four victims.
	e.touch([]int{1})
	e.touch(append(keys(5, 11), 3))
	e.rec.take()
	rs := e.reserve(t, []int{100}, 3*obj)
	require.Equal(t, l1.OK, rs[0].Status)
	assert.Equal(t, []int{0, 2, 4, 1}, evicted(e.rec.take()))
	assert.Equal(t, int64(0), rs[0].Block.Offset)
	// A 2-page object now: page 4 is still free, and the coldest
	// object, 5, next to it makes a run of 2: one victim.
	rs = e.reserve(t, []int{101}, 2*obj)
	require.Equal(t, l1.OK, rs[0].Status)
	assert.Equal(t, []int{5}, evicted(e.rec.take()))
}

// TestEvictCountsManyRuns: past the runs searched one by one (many
// scattered victims, then the ones that join them), the count still stops
// where Fit after every victim does.
func TestEvictCountsManyRuns(t *testing.T) {
	a := newAlloc(t, 100*obj, obj)
	e := newEnvOver(t, a, a, l1.Config{EvictOnDemand: true})
	e.put(t, keys(0, 100), obj)
	var odd []int
	for k := 1; k < 100; k += 2 {
		odd = append(odd, k)
	}
	e.touch(odd) // evens go first: 50 runs of one page, none adjacent
	rs, err := e.m.ReserveWrite(keys(1000, 30), nil, 2*obj, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, repeat(l1.OK, 30), statuses(rs))
	require.NoError(t, a.Verify())
	// 50 evens hold nothing of 2 pages; each odd then joins its
	// neighbours, and 30 odds make [0, 61): 30 objects.
	assert.Equal(t, uint64(80), e.m.Stats().Evictions)
}
