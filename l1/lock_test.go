package l1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// Lock lifetimes: see lock.go.

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
