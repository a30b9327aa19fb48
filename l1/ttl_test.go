package l1_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// TTLs: what a lapse does to each kind of lock, and the extreme TTLs
// (see the package doc, "Time" and "The object life cycle").

func TestWriteLockExpiry(t *testing.T) {
	t.Run("lapses_at_its_ttl", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{WriteTTL: time.Minute})
		e.reserve(t, []int{1}, obj)
		e.clk.Advance(time.Minute - 1)
		assert.True(t, e.state(t, 1).WriteLocked)
		e.clk.Advance(1)
		_, ok := e.m.State(1)
		assert.False(t, ok)
	})
	t.Run("reclaimed_by_the_next_call_and_never_readable", func(t *testing.T) {
		for name, call := range map[string]func(e *env) l1.Status{
			"ReserveRead": func(e *env) l1.Status { return e.read(t, []int{1}, 1)[0].Status },
			"UnsafeRead":  func(e *env) l1.Status { return e.unsafeRead([]int{1})[0].Status },
			"FinishWrite": func(e *env) l1.Status { return e.finish([]int{1})[0] },
			"FinishWriteAndReserveRead": func(e *env) l1.Status {
				rs, err := e.fwrr([]int{1}, 1)
				require.NoError(t, err)
				return rs[0].Status
			},
			"Delete":     func(e *env) l1.Status { return e.del([]int{1}, true)[0] },
			"AbortWrite": func(e *env) l1.Status { return e.abort([]int{1})[0] },
			"Len": func(e *env) l1.Status {
				assert.Zero(t, e.m.Len())
				return l1.KeyNotExist
			},
		} {
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, 64*KiB, l1.Config{})
				e.reserve(t, []int{1}, obj)
				e.rec.take()
				e.clk.Advance(l1.DefaultWriteTTL)
				assert.Equal(t, l1.KeyNotExist, call(e))
				assert.Zero(t, e.used())
				assert.Equal(t, uint64(1), e.m.Stats().Expired)
				assert.Equal(t, l1.Event[int]{Kind: l1.EventRemoved, Cause: l1.CauseExpired, Keys: []int{1}}, e.rec.take()[0])
			})
		}
	})
	t.Run("a_lapsed_rewrite_is_reclaimed_too", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.reserve(t, []int{1}, obj) // rewrite: the buffer may be half written
		e.clk.Advance(l1.DefaultWriteTTL)
		assert.Equal(t, l1.KeyNotExist, e.read(t, []int{1}, 1)[0].Status)
		assert.Zero(t, e.used())
	})
	t.Run("swept_at_clear", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1, 2}, obj)
		e.put(t, []int{3}, obj)
		e.clk.Advance(l1.DefaultWriteTTL)
		assert.Equal(t, 1, e.m.Clear(false), "only key 3 is cleared; 1 and 2 expired")
		assert.Zero(t, e.used())
		assert.Equal(t, uint64(2), e.m.Stats().Expired)
	})
	t.Run("swept_before_allocating", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, keys(0, 16), obj) // the pool is full of abandoned writes
		e.clk.Advance(l1.DefaultWriteTTL)
		rs := e.reserve(t, keys(100, 16), obj)
		assert.Equal(t, repeat(l1.OK, 16), statuses(rs))
		ev := e.rec.take()
		assert.Equal(t, l1.Event[int]{Kind: l1.EventRemoved, Cause: l1.CauseExpired, Keys: keys(0, 16)}, ev[len(ev)-2])
		assert.Equal(t, l1.Event[int]{Kind: l1.EventWriteReserved, Keys: keys(100, 16)}, ev[len(ev)-1])
	})
	t.Run("sweep_stops_at_the_first_live_lock", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		e.clk.Advance(time.Minute)
		e.reserve(t, []int{2}, obj)
		e.clk.Advance(l1.DefaultWriteTTL - time.Minute)
		st := e.m.Snapshot()
		require.Len(t, st, 1)
		assert.Equal(t, 2, st[0].Key)
		assert.Equal(t, 1, e.m.Stats().WriteLocked)
	})
}

func TestReadLockExpiry(t *testing.T) {
	t.Run("lapsed_read_lock_unlocks_an_ordinary_object", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{ReadTTL: time.Minute})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 3)
		e.clk.Advance(time.Minute)
		s := e.state(t, 1)
		assert.Zero(t, s.ReadLocks)
		assert.True(t, s.Evictable)
		assert.Equal(t, []l1.Status{l1.KeyInWrongState}, e.finishRead(t, []int{1}, 1))
		assert.Equal(t, l1.KeyNotReadable, e.unsafeRead([]int{1})[0].Status)
	})
	t.Run("each_lock_refreshes_the_expiry_for_every_holder", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{ReadTTL: time.Minute})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 2)
		e.clk.Advance(50 * time.Second)
		e.read(t, []int{1}, 1)
		e.clk.Advance(50 * time.Second) // 100 s after the first lock
		assert.Equal(t, 3, e.state(t, 1).ReadLocks)
		e.clk.Advance(10 * time.Second)
		assert.Zero(t, e.state(t, 1).ReadLocks, "all three holds lapse together")
	})
	t.Run("a_lapsed_count_restarts", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 5)
		e.clk.Advance(l1.DefaultReadTTL)
		e.read(t, []int{1}, 1)
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
	})
	t.Run("release_does_not_refresh", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{ReadTTL: time.Minute})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 2)
		e.clk.Advance(30 * time.Second)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, e.clk.Now().Add(30*time.Second), e.state(t, 1).ReadExpiry)
	})
}

// A TTL of NoExpiry (math.MaxInt64) never lapses: now + ttl saturates.
// From a hostile review (extreme TTLs).
func TestTTLOfMaxInt64NeverLapses(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: l1.NoExpiry, ReadTTL: math.MaxInt64})
	rs := e.reserve(t, []int{1, 2}, obj)
	e.clk.Advance(time.Nanosecond)
	st, err := e.m.FinishWrite([]int{1}, []l1.Lease{rs[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, st, "write lock still held")
	e.read(t, []int{1}, 1)
	e.clk.Advance(time.Nanosecond)
	assert.Equal(t, []l1.Status{l1.KeyIsLocked}, e.del([]int{1}, false), "read lock still held")
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Zero(t, n, "a read-locked object is not evicted")
	assert.True(t, e.state(t, 2).WriteLocked)
	// Not after 1000 years either.
	for range 4 {
		e.clk.Advance(250 * 365 * 24 * time.Hour)
		assert.True(t, e.state(t, 2).WriteLocked)
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
	}
}

// A TTL of 1 ns holds at the instant the lock is taken and lapses 1 ns
// later.
// From a hostile review (extreme TTLs).
func TestTTLOfOneNanosecond(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 1, ReadTTL: 1})
	e.reserve(t, []int{1}, obj)
	assert.True(t, e.state(t, 1).WriteLocked, "held at the instant it was taken")
	e.clk.Advance(time.Nanosecond)
	_, ok := e.m.State(1)
	assert.False(t, ok, "lapsed and reclaimed 1 ns later")
	assert.Zero(t, e.used())
}

// A lapsed write lock reclaims its object: unfinished data never becomes
// readable.
// From LMCache, where an expired write lock made its data readable.
func TestExpiredWriteLockIsNeverReadable(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	w := e.reserve(t, []int{1}, obj)
	copy(e.a.Bytes(w[0].Block), "half a wri")
	e.clk.Advance(l1.DefaultWriteTTL)
	assert.Equal(t, []l1.Result{{Status: l1.KeyNotExist}}, e.read(t, []int{1}, 1))
	assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.finish([]int{1}), "a late writer cannot commit")
	assert.Zero(t, e.used())
}

// A temporary object whose read lock lapsed is reclaimed, at the next call
// that names it or at Clear; a lock refreshed in time survives.
// From LMCache, which answered KEY_IN_WRONG_STATE and never freed it.
func TestExpiredTemporaryReadIsReclaimed(t *testing.T) {
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
