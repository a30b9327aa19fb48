package l1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// The subtests of this file are LMCache's test_l1_manager.py tests of
// reserve_read, unsafe_read and finish_read, by name.

func TestReserveRead(t *testing.T) {
	t.Run("non_existing_key_returns_key_not_exist", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		rs := e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotExist}}, rs)
	})
	t.Run("write_locked_key_returns_key_not_readable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		rs := e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotReadable}}, rs)
		assert.Equal(t, 0, e.state(t, 1).ReadLocks)
	})
	t.Run("ready_key_returns_success", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		rs := e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Result{{Status: l1.OK, Block: w[0].Block, Lease: w[0].Lease + 1}}, rs)
		assert.Equal(t, []int{1}, e.rec.last(l1.EventReadReserved))
	})
	t.Run("multiple_keys", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		e.reserve(t, []int{3}, obj)
		rs := e.read(t, []int{1, 9, 3, 2}, 1)
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotExist, l1.KeyNotReadable, l1.OK}, statuses(rs))
		assert.Equal(t, []int{1, 2}, e.rec.last(l1.EventReadReserved))
	})
	t.Run("can_be_called_multiple_times", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		e.read(t, []int{1}, 1)
		assert.Equal(t, 2, e.state(t, 1).ReadLocks)
	})
	t.Run("with_multiple_read_locks", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 3)
		for i := 3; i > 0; i-- {
			assert.Equal(t, i, e.state(t, 1).ReadLocks)
			assert.False(t, e.m.IsEvictable(1))
			assert.Equal(t, []l1.Status{l1.OK}, e.finishRead(t, []int{1}, 1))
		}
		assert.Equal(t, 0, e.state(t, 1).ReadLocks)
		assert.True(t, e.m.IsEvictable(1))
	})
	t.Run("default_is_single_read_lock", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, []l1.Status{l1.KeyInWrongState}, e.finishRead(t, []int{1}, 1))
	})
	t.Run("locks_outside_range_is_an_error", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		for _, n := range []int{0, -1, l1.MaxReadLocks + 1} {
			rs, err := e.m.ReserveRead([]int{1}, n)
			require.ErrorIs(t, err, l1.ErrInvalidArgument)
			assert.Nil(t, rs)
		}
		assert.Equal(t, 0, e.state(t, 1).ReadLocks)
		e.read(t, []int{1}, l1.MaxReadLocks)
		assert.Equal(t, l1.MaxReadLocks, e.state(t, 1).ReadLocks)
	})
}

func TestUnsafeRead(t *testing.T) {
	t.Run("non_existing_key_returns_key_not_exist", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotExist}}, e.unsafeRead([]int{1}))
	})
	t.Run("non_read_locked_returns_key_not_readable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotReadable}}, e.unsafeRead([]int{1}))
	})
	t.Run("write_locked_returns_key_not_readable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotReadable}}, e.unsafeRead([]int{1}))
	})
	t.Run("read_locked_returns_success", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		r := e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Result{{Status: l1.OK, Block: w[0].Block, Lease: r[0].Lease}}, e.unsafeRead([]int{1}))
	})
	t.Run("returns_same_memory_obj_as_reserve_read", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		rs := e.read(t, []int{1, 2}, 1)
		assert.Equal(t, rs, e.unsafeRead([]int{1, 2}))
	})
	t.Run("multiple_times_without_adding_read_count", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		e.rec.take()
		for range 3 {
			assert.Equal(t, l1.OK, e.unsafeRead([]int{1})[0].Status)
		}
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
		assert.Empty(t, e.rec.take(), "UnsafeRead reports no event")
	})
	t.Run("multiple_keys", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		e.reserve(t, []int{3}, obj)
		e.read(t, []int{1}, 1)
		rs := e.unsafeRead([]int{1, 2, 3, 4})
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotReadable, l1.KeyNotReadable, l1.KeyNotExist}, statuses(rs))
	})
	t.Run("between_reserve_and_finish", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		assert.Equal(t, l1.KeyNotReadable, e.unsafeRead([]int{1})[0].Status)
		e.read(t, []int{1}, 1)
		assert.Equal(t, l1.OK, e.unsafeRead([]int{1})[0].Status)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, l1.KeyNotReadable, e.unsafeRead([]int{1})[0].Status)
	})
}

func TestFinishRead(t *testing.T) {
	t.Run("non_existing_key_returns_key_not_exist", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.finishRead(t, []int{1}, 1))
	})
	t.Run("success", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Status{l1.OK}, e.finishRead(t, []int{1}, 1))
		assert.Equal(t, []int{1}, e.rec.last(l1.EventReadFinished))
		assert.Equal(t, 0, e.state(t, 1).ReadLocks)
	})
	t.Run("non_read_locked_returns_wrong_state", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyInWrongState}, e.finishRead(t, []int{1}, 1))
	})
	t.Run("write_locked_returns_wrong_state", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyInWrongState}, e.finishRead(t, []int{1}, 1))
		assert.True(t, e.state(t, 1).WriteLocked)
	})
	t.Run("temporary_object_deleted_when_count_zero", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		e.rec.take()
		assert.Equal(t, []l1.Status{l1.OK}, e.finishRead(t, []int{1}, 1))
		_, ok := e.m.State(1)
		assert.False(t, ok)
		assert.Zero(t, e.used())
		assert.Equal(t, []l1.Event[int]{
			{Kind: l1.EventReadFinished, Keys: []int{1}},
			{Kind: l1.EventRemoved, Cause: l1.CauseTemporaryRead, Keys: []int{1}},
		}, e.rec.take())
	})
	t.Run("multiple_reads_count_down", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		for range 3 {
			e.read(t, []int{1}, 1)
		}
		for i := 2; i >= 0; i-- {
			e.finishRead(t, []int{1}, 1)
			assert.Equal(t, i, e.state(t, 1).ReadLocks)
		}
	})
	t.Run("with_multiple_read_locks_releases_multiple", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 5)
		assert.Equal(t, []l1.Status{l1.OK}, e.finishRead(t, []int{1}, 5))
		assert.Equal(t, 0, e.state(t, 1).ReadLocks)
	})
	t.Run("partial_read_lock_release", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 5)
		e.finishRead(t, []int{1}, 2)
		assert.Equal(t, 3, e.state(t, 1).ReadLocks)
		assert.False(t, e.m.IsEvictable(1))
	})
	t.Run("all_read_locks_deletes_temporary", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		e.read(t, []int{1}, 4)
		e.finishRead(t, []int{1}, 4)
		_, ok := e.m.State(1)
		assert.False(t, ok)
		assert.Zero(t, e.used())
	})
	t.Run("temp_survives_partial_read_locks", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		e.read(t, []int{1}, 4)
		e.finishRead(t, []int{1}, 3)
		s := e.state(t, 1)
		assert.Equal(t, 1, s.ReadLocks)
		assert.True(t, s.Temporary)
		e.finishRead(t, []int{1}, 1)
		_, ok := e.m.State(1)
		assert.False(t, ok)
	})
	t.Run("releasing_more_than_held_floors_at_zero", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 2)
		assert.Equal(t, []l1.Status{l1.OK}, e.finishRead(t, []int{1}, 5))
		assert.Equal(t, 0, e.state(t, 1).ReadLocks)
	})
	t.Run("repeated_key_in_one_call", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		e.read(t, []int{1, 1}, 1)
		assert.Equal(t, 2, e.state(t, 1).ReadLocks)
		assert.Equal(t, []l1.Status{l1.OK, l1.OK, l1.KeyNotExist}, e.finishRead(t, []int{1, 1, 1}, 1))
	})
	t.Run("locks_outside_range_is_an_error", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		for _, n := range []int{0, l1.MaxReadLocks + 1} {
			st, err := e.fr([]int{1}, n)
			require.ErrorIs(t, err, l1.ErrInvalidArgument)
			assert.Nil(t, st)
		}
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
	})
}

// A call takes up to MaxReadLocks holds at once; a count outside [1,
// MaxReadLocks] is an error, not a silent clamp.
// From LMCache, which took locks one Python loop step per hold.
func TestLockCountsAreExact(t *testing.T) {
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
