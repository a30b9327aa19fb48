package l1_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// One test per weakness of LMCache's L1 manager this package fixes. The
// probe storm of its largest-prefix search (about log2(n) trial
// allocations) is TestRestore5700 and TestLargestPrefixProbe; grants other
// than prefixes (a bitmap of granted keys) are not done.

// LMCache's reserve_write allocated a key repeated in one call twice and
// leaked one buffer.
func TestFixDuplicateKeysAllocateOnce(t *testing.T) {
	for _, mode := range l1.Modes {
		t.Run(mode.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{})
			e.put(t, []int{7}, obj)
			rs, err := e.m.ReserveWrite([]int{1, 2, 1, 7, 7, 1}, []bool{false, false, true, false, false, true}, obj, mode)
			require.NoError(t, err)
			var want []l1.Status
			switch mode {
			case l1.ModeAll:
				want = []l1.Status{l1.OK, l1.OK, l1.KeyNotWritable, l1.OK, l1.KeyNotWritable, l1.KeyNotWritable}
			case l1.ModeNew:
				want = []l1.Status{l1.OK, l1.OK, l1.KeyNotWritable, l1.KeyNotWritable, l1.KeyNotWritable, l1.KeyNotWritable}
			case l1.ModeUpdate:
				want = []l1.Status{l1.KeyNotWritable, l1.KeyNotWritable, l1.KeyNotWritable, l1.OK, l1.KeyNotWritable, l1.KeyNotWritable}
			}
			assert.Equal(t, want, statuses(rs))
			assert.Equal(t, int64(e.m.Len()), e.a.Stats().LiveBlocks, "one block per object, none leaked")
			if mode != l1.ModeUpdate {
				assert.False(t, e.state(t, 1).Temporary, "the first occurrence's flag wins")
			}
			e.m.Clear(true)
			assert.Zero(t, e.used())
		})
	}
}

// LMCache's early returns (nothing to allocate; update mode) skipped the
// notifications for existing keys that were re-locked.
func TestFixRelockedKeysAreReported(t *testing.T) {
	t.Run("update_mode", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.rec.take()
		_, err := e.m.ReserveWrite([]int{1, 2}, nil, obj, l1.ModeUpdate)
		require.NoError(t, err)
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteReserved, Keys: []int{1}}}, e.rec.take())
	})
	t.Run("nothing_to_allocate", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		e.rec.take()
		e.reserve(t, []int{2, 1}, obj)
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteReserved, Keys: []int{2, 1}}}, e.rec.take())
	})
	t.Run("mixed_in_request_order", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{2}, obj)
		e.rec.take()
		e.reserve(t, []int{1, 2, 3}, obj)
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteReserved, Keys: []int{1, 2, 3}}}, e.rec.take())
	})
}

// LMCache's zip(strict=False) silently truncated keys and temporary flags
// of different lengths.
func TestFixMismatchedLengthsAreRejected(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	for _, flags := range [][]bool{{true}, {true, false, true}} {
		rs, err := e.m.ReserveWrite([]int{1, 2}, flags, obj, l1.ModeAll)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		assert.Nil(t, rs)
	}
	assert.Zero(t, e.m.Len())
	assert.Zero(t, e.m.Stats().AllocCalls)
}

// A write is invisible to readers until FinishWrite, a rewrite of a
// finished object included.
func TestFixUnfinishedWritesAreInvisible(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.reserve(t, []int{1}, obj)
	e.put(t, []int{2}, obj)
	e.reserve(t, []int{2}, obj) // rewrite
	for _, k := range []int{1, 2} {
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotReadable}}, e.read(t, []int{k}, 1), "key %d", k)
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotReadable}}, e.unsafeRead([]int{k}), "key %d", k)
		assert.Equal(t, []l1.Status{l1.KeyInWrongState}, e.finishRead(t, []int{k}, 1), "key %d", k)
		assert.False(t, e.m.IsEvictable(k))
	}
	assert.Equal(t, []l1.Status{l1.KeyIsLocked, l1.KeyIsLocked}, e.del([]int{1, 2}, false))
	e.finish([]int{1, 2})
	assert.Equal(t, []l1.Status{l1.OK, l1.OK}, statuses(e.read(t, []int{1, 2}, 1)))
}

// In LMCache an expired write lock exposed uninitialised data as readable.
func TestFixExpiredWriteLockIsNeverReadable(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	w := e.reserve(t, []int{1}, obj)
	copy(e.a.Bytes(w[0].Block), "half a wri")
	e.clk.Advance(l1.DefaultWriteTTL)
	assert.Equal(t, []l1.Result{{Status: l1.KeyNotExist}}, e.read(t, []int{1}, 1))
	assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.finish([]int{1}), "a late writer cannot commit")
	assert.Zero(t, e.used())
}

// In LMCache a temporary object whose read lock lapsed before finish_read
// got KEY_IN_WRONG_STATE and was never freed.
func TestFixExpiredTemporaryReadIsReclaimed(t *testing.T) {
	t.Run("at_the_next_touch", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		_, err := e.m.ReserveWrite([]int{1}, []bool{true}, obj, l1.ModeAll)
		require.NoError(t, err)
		_, err = e.fwrr([]int{1}, 2)
		require.NoError(t, err)
		e.clk.Advance(l1.DefaultReadTTL)
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.finishRead(t, []int{1}, 2))
		assert.Zero(t, e.used())
		st := e.m.Stats()
		assert.Equal(t, uint64(1), st.Expired)
		assert.Zero(t, st.TemporaryReadLocked)
	})
	t.Run("at_clear", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1, 2}, obj)
		e.read(t, []int{1, 2}, 1)
		e.clk.Advance(l1.DefaultReadTTL)
		assert.Zero(t, e.m.Clear(false))
		assert.Zero(t, e.used())
	})
	t.Run("a_refreshed_lock_survives", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1, 2}, obj)
		e.read(t, []int{1, 2}, 1)
		e.clk.Advance(l1.DefaultReadTTL / 2)
		e.read(t, []int{1}, 1) // moves 1 behind 2 in the expiry queue
		e.clk.Advance(l1.DefaultReadTTL / 2)
		snap := e.m.Snapshot()
		require.Len(t, snap, 1)
		assert.Equal(t, 1, snap[0].Key)
		assert.Equal(t, 2, snap[0].ReadLocks)
	})
}

// LMCache's listeners ran inside its global lock. Here a listener may call
// back into the manager itself, and may wait for another goroutine's call
// that makes no event (a read, State, Stats); see Listener for why it must
// not wait for another goroutine's call that does.
func TestFixListenersRunOutsideTheLock(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	var nested []l1.Status
	var seen l1.ObjectState
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		if ev.Kind != l1.EventWriteReserved {
			return
		}
		done := make(chan l1.ObjectState)
		go func() {
			s, _ := e.m.State(ev.Keys[0])
			e.unsafeRead(ev.Keys)
			done <- s
		}()
		seen = <-done
		nested = e.finish(ev.Keys)
	})
	e.reserve(t, []int{1, 2}, obj)
	assert.True(t, seen.WriteLocked)
	assert.Equal(t, []l1.Status{l1.OK, l1.OK}, nested)
	assert.Equal(t, []l1.Event[int]{
		{Kind: l1.EventWriteReserved, Keys: []int{1, 2}},
		{Kind: l1.EventWriteFinished, Keys: []int{1, 2}},
	}, e.rec.take())
}

// LMCache's get_memory_usage and is_key_evictable read without the lock. Here
// Usage never sees a binary-search probe's blocks, which are allocated and
// freed inside one ReserveWrite.
func TestFixReadsTakeTheLock(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{Prefix: l1.PrefixBinarySearch})
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
		e.del(keys(0, 20), true)
	}
	stop.Store(true)
	wg.Wait()
	assert.Zero(t, bad.Load(), "Usage saw a probe")
	assert.Equal(t, uint64(800), e.m.Stats().Probes)
}

// LMCache took locks one Python loop step per hold. Here a call takes
// up to MaxReadLocks holds at once, and outside [1, MaxReadLocks] is an
// error rather than a silent clamp.
func TestFixLockCountsAreExact(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1}, obj)
	for range 3 {
		e.read(t, []int{1}, l1.MaxReadLocks)
	}
	assert.Equal(t, 3*l1.MaxReadLocks, e.state(t, 1).ReadLocks)
	_, err := e.m.ReserveRead([]int{1}, l1.MaxReadLocks+1)
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.Equal(t, 3*l1.MaxReadLocks, e.state(t, 1).ReadLocks)
}

// LMCache evicts only on a 1 s poll above a 0.8 watermark: with 18 of 28
// chunks resident, an 11-chunk restore OOMs at 64 % usage and the watermark
// never fires. On-demand eviction makes room synchronously.
func TestFixOnDemandEviction(t *testing.T) {
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

// LMCache's telemetry had only used and total bytes.
func TestFixStats(t *testing.T) {
	e := newEnv(t, 16*obj, l1.Config{Prefix: l1.PrefixBinarySearch, EvictOnDemand: true})
	e.put(t, keys(100, 4), obj)
	e.read(t, []int{100, 101, 102, 103}, 1)
	e.reserve(t, keys(0, 14), obj)                                       // 12 fit, nothing evictable
	_, err := e.m.ReserveWrite([]int{50}, []bool{true}, obj, l1.ModeAll) // the pool is full
	require.NoError(t, err)
	e.clk.Advance(l1.DefaultWriteTTL)
	st := e.m.Stats()
	assert.Equal(t, 16, st.Objects, "Stats does not sweep")
	assert.Equal(t, 12, st.WriteLocked)
	assert.Equal(t, int64(16*obj), st.Used)
	assert.Equal(t, int64(16*obj), st.Capacity)
	assert.Equal(t, uint64(3), st.OOMKeys)
	assert.Equal(t, uint64(1), st.PartialGrants)
	assert.Equal(t, uint64(1), st.FailedReservations)
	assert.Equal(t, uint64(4+12), st.WriteReservations)
	assert.Positive(t, st.Probes)
	assert.Zero(t, st.Evictions)
	assert.Equal(t, 4, e.m.Len())
	assert.Equal(t, uint64(12), e.m.Stats().Expired)
	used, capacity := e.m.Usage()
	assert.Equal(t, 4*obj, used)
	assert.Equal(t, 16*obj, capacity)
}
