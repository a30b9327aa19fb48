package l1_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// forEachPolicy runs f once per eviction policy, the way bbolt runs its
// suite once per freelist: every contract of eviction holds under each, and
// only the order of victims differs.
func forEachPolicy(t *testing.T, f func(t *testing.T, p l1.EvictionPolicy)) {
	for _, p := range l1.EvictionPolicies {
		t.Run("policy="+p.String(), func(t *testing.T) { f(t, p) })
	}
}

func TestEvictOnDemand(t *testing.T) {
	forEachPolicy(t, testEvictOnDemand)
}

func testEvictOnDemand(t *testing.T, policy l1.EvictionPolicy) {
	// Every case runs over the allocator (eviction counts slots per
	// victim), with the default placement and with Scattered, under
	// which a victim's block goes to the batch in place (Reissue) over
	// the allocator; a case that sets a placement keeps it.
	for _, place := range []allocator.Placement{allocator.ContiguousFirst, allocator.Scattered} {
		t.Run(place.String(), func(t *testing.T) {
			// newE's manager runs under prefix strategy s, onepass
			// unless given.
			newE := func(t *testing.T, cfg l1.Config, s ...baseline.Strategy) *env {
				a := newAlloc(t, 16*obj, obj)
				if cfg.Placement == allocator.ContiguousFirst {
					cfg.Placement = place
				}
				cfg.EvictOnDemand = true
				cfg.Eviction = policy
				var mem l1.Memory = a
				for _, s := range s {
					mem = under(s, a, cfg)
				}
				return newEnvOver(t, a, mem, cfg)
			}
			t.Run("least_recently_used_first", func(t *testing.T) {
				if policy != l1.EvictLRU {
					t.Skip("victim order is LRU's")
				}
				e := newE(t, l1.Config{})
				e.put(t, keys(100, 16), obj)
				e.touch([]int{100})
				e.read(t, []int{101}, 1)
				e.finishRead(t, []int{101}, 1)
				e.rec.take()
				rs := e.reserve(t, keys(0, 3), obj)
				assert.Equal(t, repeat(l1.OK, 3), statuses(rs))
				assert.Equal(t, []l1.Event[int]{
					{Kind: l1.EventRemoved, Cause: l1.CauseEvicted, Keys: []int{102, 103, 104}},
					{Kind: l1.EventWriteReserved, Keys: keys(0, 3)},
				}, e.rec.take())
				st := e.m.Stats()
				assert.Equal(t, uint64(3), st.Evictions)
				assert.Equal(t, uint64(3), st.OnDemandEvictions)
				assert.Zero(t, st.OOMKeys)
				require.NoError(t, e.a.Verify())
			})
			t.Run("never_evicts_keys_of_the_request", func(t *testing.T) {
				e := newE(t, l1.Config{})
				e.put(t, keys(100, 16), obj)
				rs, err := e.m.ReserveWrite([]int{100, 0, 101, 1}, nil, obj, l1.ModeNew)
				require.NoError(t, err)
				assert.Equal(t, []l1.Status{l1.KeyNotWritable, l1.OK, l1.KeyNotWritable, l1.OK}, statuses(rs))
				for _, k := range []int{100, 101} {
					_, ok := e.m.State(k)
					assert.True(t, ok, "key %d of the request was evicted", k)
				}
				assert.Equal(t, uint64(2), e.m.Stats().Evictions)
			})
			t.Run("never_evicts_locked_or_unfinished_objects", func(t *testing.T) {
				e := newE(t, l1.Config{})
				e.put(t, keys(100, 8), obj)
				e.read(t, keys(100, 4), 1)
				e.reserve(t, keys(200, 8), obj) // write-locked, never finished
				rs := e.reserve(t, keys(0, 6), obj)
				// 4 evictable (104-107): 4 granted, 2 OOM.
				assert.Equal(t, append(repeat(l1.OK, 4), repeat(l1.OutOfMemory, 2)...), statuses(rs))
				for _, k := range append(keys(100, 4), keys(200, 8)...) {
					_, ok := e.m.State(k)
					assert.True(t, ok, "locked key %d was evicted", k)
				}
				assert.Equal(t, uint64(4), e.m.Stats().Evictions)
				require.NoError(t, e.a.Verify())
			})
			t.Run("never_evicts_read_locked_temporary_objects", func(t *testing.T) {
				e := newE(t, l1.Config{})
				e.putTemp(t, keys(100, 14), obj) // finished, temporary
				e.read(t, keys(100, 14), 1)      // waiting for their reader
				e.put(t, keys(200, 2), obj)
				rs := e.reserve(t, keys(0, 3), obj)
				assert.Equal(t, []l1.Status{l1.OK, l1.OK, l1.OutOfMemory}, statuses(rs))
				assert.Equal(t, uint64(2), e.m.Stats().Evictions)
				assert.Equal(t, 16, e.m.Len())
			})
			t.Run("stops_as_soon_as_the_batch_fits", func(t *testing.T) {
				e := newE(t, l1.Config{})
				e.put(t, keys(100, 14), obj) // 2 pages free
				rs := e.reserve(t, keys(0, 5), obj)
				assert.Equal(t, repeat(l1.OK, 5), statuses(rs))
				assert.Equal(t, uint64(3), e.m.Stats().Evictions)
			})
			t.Run("size_above_capacity_evicts_nothing", func(t *testing.T) {
				e := newE(t, l1.Config{})
				e.put(t, keys(100, 4), obj)
				rs := e.reserve(t, keys(0, 2), 17*obj)
				assert.Equal(t, repeat(l1.OutOfMemory, 2), statuses(rs))
				assert.Zero(t, e.m.Stats().Evictions)
				assert.Equal(t, 4, e.m.Len())
			})
			t.Run("contiguous_placement_evicts_until_a_run_fits", func(t *testing.T) {
				if policy != l1.EvictLRU {
					t.Skip("victim order is LRU's")
				}
				e := newE(t, l1.Config{Placement: allocator.Contiguous})
				e.put(t, keys(100, 16), obj)
				// Free every other page: 8 pages free, no run of 2.
				var odd []int
				for k := 101; k < 116; k += 2 {
					odd = append(odd, k)
				}
				e.del(odd, false)
				e.touch([]int{100, 102}) // the coldest is now 104
				rs := e.reserve(t, keys(0, 3), obj)
				assert.Equal(t, repeat(l1.OK, 3), statuses(rs))
				assert.Equal(t, rs[0].Block.End(), rs[1].Block.Offset)
				assert.Equal(t, rs[1].Block.End(), rs[2].Block.Offset)
				assert.Equal(t, uint64(1), e.m.Stats().Evictions, "evicting 104 joins 103-105")
			})
			t.Run("then_the_prefix_under_each_strategy", func(t *testing.T) {
				for _, s := range baseline.Strategies {
					e := newE(t, l1.Config{}, s)
					e.put(t, keys(100, 16), obj)
					e.read(t, keys(100, 10), 1)
					rs := e.reserve(t, keys(0, 8), obj)
					k := 6
					if s == baseline.None {
						k = 0
					}
					assert.Equal(t, append(repeat(l1.OK, k), repeat(l1.OutOfMemory, 8-k)...), statuses(rs), s.String())
					assert.Equal(t, uint64(6), e.m.Stats().Evictions, s.String())
				}
			})
		})
	}
}

func TestEvictTo(t *testing.T) {
	forEachPolicy(t, testEvictTo)
}

func testEvictTo(t *testing.T, policy l1.EvictionPolicy) {
	cfg := l1.Config{Eviction: policy}
	t.Run("least_recently_used_first_until_the_ratio", func(t *testing.T) {
		if policy != l1.EvictLRU {
			t.Skip("victim order is LRU's")
		}
		e := newEnv(t, 16*obj, cfg)
		e.put(t, keys(100, 16), obj)
		e.touch([]int{100})
		e.read(t, []int{101}, 1)
		e.rec.take()
		n, err := e.m.EvictTo(0.5)
		require.NoError(t, err)
		assert.Equal(t, 8, n)
		assert.Equal(t, 8*obj, e.used())
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventRemoved, Cause: l1.CauseEvicted, Keys: keys(102, 8)}}, e.rec.take())
		assert.Equal(t, uint64(8), e.m.Stats().Evictions)
		assert.Zero(t, e.m.Stats().OnDemandEvictions)
	})
	t.Run("already_below", func(t *testing.T) {
		e := newEnv(t, 16*obj, cfg)
		e.put(t, keys(100, 4), obj)
		for _, r := range []float64{1, 0.25} {
			n, err := e.m.EvictTo(r)
			require.NoError(t, err)
			assert.Zero(t, n)
		}
	})
	t.Run("zero_evicts_every_evictable_object", func(t *testing.T) {
		e := newEnv(t, 16*obj, cfg)
		e.put(t, keys(100, 6), obj)
		e.read(t, []int{103}, 1)
		e.reserve(t, []int{200}, obj)
		e.putTemp(t, []int{300}, obj)
		n, err := e.m.EvictTo(0)
		require.NoError(t, err)
		assert.Equal(t, 6, n, "the unread temporary object too")
		assert.Equal(t, 2, e.m.Len(), "read-locked and write-locked objects stay")
	})
	t.Run("counts_the_managers_bytes_only", func(t *testing.T) {
		// Another user of the same allocator holds half of it; EvictTo
		// measures the manager's own objects, so it stops at its share.
		e := newEnv(t, 16*obj, cfg)
		_, err := e.a.AllocateBatch(obj, 8, allocator.ContiguousFirst)
		require.NoError(t, err)
		e.put(t, keys(100, 8), obj)
		used, capacity := e.m.Usage()
		assert.Equal(t, 8*obj, used)
		assert.Equal(t, 16*obj, capacity)
		n, err := e.m.EvictTo(0.25)
		require.NoError(t, err)
		assert.Equal(t, 4, n)
		st := e.m.Stats()
		assert.Equal(t, 4*obj, st.Held)
		assert.Equal(t, 12*obj, st.Used)
	})
	t.Run("invalid_ratio_changes_nothing", func(t *testing.T) {
		e := newEnv(t, 16*obj, cfg)
		e.put(t, keys(100, 6), obj)
		for _, r := range []float64{-0.1, 1.01, math.NaN(), math.Inf(1)} {
			n, err := e.m.EvictTo(r)
			require.ErrorIs(t, err, l1.ErrInvalidArgument, fmt.Sprint(r))
			assert.Zero(t, n)
		}
		assert.Equal(t, 6, e.m.Len())
	})
}

// Over the allocator, a batch that the capacity left by the manager's own
// objects cannot hold goes to on-demand eviction without the allocation
// call that must fail: one allocator call in all, and the allocator
// records no failure. So does a batch that may fit by that count but not
// by Fit (another user holds the memory): eviction asks Fit first.
func TestOnDemandEvictionSkipsTheCallThatMustFail(t *testing.T) {
	e := newEnv(t, 16*obj, l1.Config{EvictOnDemand: true})
	e.put(t, keys(100, 14), obj) // 2 pages free
	calls := e.m.Stats().AllocCalls
	rs := e.reserve(t, keys(0, 3), obj)
	assert.Equal(t, repeat(l1.OK, 3), statuses(rs))
	assert.Equal(t, uint64(1), e.m.Stats().Evictions)
	assert.Equal(t, calls+1, e.m.Stats().AllocCalls, "no full call before eviction")
	assert.Zero(t, e.a.Stats().FailedNoSpace)

	// 1 page free by l1's count, but another user holds it: Fit says so,
	// and eviction follows, then the one call.
	e.finish(keys(0, 3))
	assert.Equal(t, []l1.Status{l1.OK}, e.del([]int{105}, false))
	other, err := e.a.Allocate(obj)
	require.NoError(t, err)
	calls = e.m.Stats().AllocCalls
	rs = e.reserve(t, []int{50}, obj)
	assert.Equal(t, []l1.Status{l1.OK}, statuses(rs))
	assert.Equal(t, calls+1, e.m.Stats().AllocCalls, "one call, after eviction")
	assert.Zero(t, e.a.Stats().FailedNoSpace)
	require.NoError(t, e.a.Free(other))
	require.NoError(t, e.a.Verify())
}

// A closed allocator under a full manager with on-demand eviction: the
// call fails with the allocator's ErrClosed and grants nothing.
func TestOnDemandEvictionOverAClosedAllocator(t *testing.T) {
	for _, place := range []allocator.Placement{allocator.ContiguousFirst, allocator.Scattered} {
		t.Run(place.String(), func(t *testing.T) {
			e := newEnv(t, 16*obj, l1.Config{EvictOnDemand: true, Placement: place})
			e.put(t, keys(100, 16), obj)
			require.NoError(t, e.a.Close())
			_, err := e.m.ReserveWrite(keys(0, 2), nil, obj, l1.ModeNew)
			require.ErrorIs(t, err, allocator.ErrClosed)
			_, ok := e.m.State(0)
			assert.False(t, ok)
		})
	}
}

// Over the allocator with Scattered placement, a victim whose block is one
// object's size goes to the batch in place (allocator.Reissue): the batch
// gets the victims' blocks first, in eviction order, then blocks from the
// free space. The victim's old handle is stale: it frees nothing.
func TestOnDemandEvictionReusesTheVictimsBlocks(t *testing.T) {
	e := newEnv(t, 16*obj, l1.Config{EvictOnDemand: true, Placement: allocator.Scattered})
	old := e.put(t, keys(100, 16), obj)
	e.del([]int{100}, false) // the first page is free
	e.touch([]int{101})      // the least recently used is now 102
	before := e.a.Stats()
	calls := e.m.Stats().AllocCalls
	rs := e.reserve(t, keys(0, 2), obj)
	assert.Equal(t, repeat(l1.OK, 2), statuses(rs))
	assert.Equal(t, old[2].Block.Offset, rs[0].Block.Offset, "102's block, reissued")
	assert.Greater(t, rs[0].Block.Gen, old[2].Block.Gen)
	assert.Equal(t, old[0].Block.Offset, rs[1].Block.Offset, "then the free page")
	_, ok := e.m.State(102)
	assert.False(t, ok)
	assert.Equal(t, uint64(1), e.m.Stats().Evictions)
	assert.Equal(t, calls+2, e.m.Stats().AllocCalls, "one Reissue, one batch for the rest")
	after := e.a.Stats()
	assert.Equal(t, before.Allocs+2, after.Allocs)
	assert.Equal(t, before.Frees+1, after.Frees, "the reissue counts as a free and an allocation")
	assert.Zero(t, after.Free)
	err := e.a.Free(old[2].Block)
	require.ErrorIs(t, err, allocator.ErrInvalidBlock, "the victim's handle is stale")
	require.NoError(t, e.a.Verify())
	used, _ := e.m.Usage()
	assert.Equal(t, after.Used, used)
}

// With 18 of 28 chunks resident an 11-chunk restore OOMs at 64 % usage,
// where a 0.8 watermark never fires; on-demand eviction makes room
// synchronously.
// From an LMCache report: it evicts only on a 1 s poll above the watermark.
func TestOnDemandEvictionBelowTheWatermark(t *testing.T) {
	for _, evict := range []bool{false, true} {
		e := newEnv(t, 28*obj, l1.Config{EvictOnDemand: evict})
		e.put(t, keys(100, 18), obj)
		rs := e.reserve(t, keys(0, 11), obj)
		if !evict {
			assert.Equal(t, append(repeat(l1.OK, 10), l1.OutOfMemory), statuses(rs))
			continue
		}
		assert.Equal(t, repeat(l1.OK, 11), statuses(rs))
		st := e.m.Stats()
		assert.Equal(t, uint64(1), st.Evictions)
		_, ok := e.m.State(100)
		assert.False(t, ok, "the least recently used chunk went")
	}
}

// A temporary object finished and never read holds no lock; 24 hours later
// EvictTo(0) must reclaim it, as LMCache would.
// From a hostile review.
func TestFinishedTemporaryObjectIsEvictable(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.putTemp(t, []int{1}, obj)
	e.clk.Advance(24 * time.Hour)
	assert.True(t, e.m.IsEvictable(1))
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, e.used())

	t.Run("on_demand", func(t *testing.T) {
		e := newEnv(t, 2*obj, l1.Config{EvictOnDemand: true})
		e.putTemp(t, []int{1, 2}, obj)
		rs := e.reserve(t, []int{3}, obj)
		assert.Equal(t, l1.OK, rs[0].Status)
		_, ok := e.m.State(1)
		assert.False(t, ok, "the least recently used temporary object was evicted")
	})
}
