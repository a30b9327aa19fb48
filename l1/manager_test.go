package l1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// The subtests of this file are LMCache's test_l1_manager.py tests of
// delete, get_object_state, close, the state machine and
// is_key_evictable, by name, plus this package's additions.

func TestNew(t *testing.T) {
	a := newAlloc(t, 64*KiB, 0)
	for name, cfg := range map[string]l1.Config{
		"placement": {Placement: allocator.Placement(9)},
		"write ttl": {WriteTTL: -1},
		"read ttl":  {ReadTTL: -1},
	} {
		_, err := l1.New[int](a, cfg)
		require.ErrorIs(t, err, l1.ErrInvalidArgument, name)
	}
	_, err := l1.New[int](nil, l1.Config{})
	require.ErrorIs(t, err, l1.ErrInvalidArgument)

	m, err := l1.New[l1.ObjectKey](a, l1.Config{})
	require.NoError(t, err)
	cfg := m.Config()
	assert.Equal(t, l1.DefaultWriteTTL, cfg.WriteTTL)
	assert.Equal(t, l1.DefaultReadTTL, cfg.ReadTTL)
	k := l1.ObjectKey{ChunkHash: "\x01\x02", Model: "m", KVRank: 1, GroupID: 2, CacheSalt: "s"}
	rs, err := m.ReserveWrite([]l1.ObjectKey{k}, nil, obj, l1.ModeAll)
	require.NoError(t, err)
	assert.Equal(t, l1.OK, rs[0].Status)
	assert.Equal(t, "m/r1/g2/0102/s", k.String())
}

func TestDelete(t *testing.T) {
	t.Run("non_existing_key_returns_key_not_exist", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.del([]int{1}, false))
	})
	t.Run("success", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.rec.take()
		assert.Equal(t, []l1.Status{l1.OK}, e.del([]int{1}, false))
		_, ok := e.m.State(1)
		assert.False(t, ok)
		assert.Zero(t, e.used())
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventRemoved, Cause: l1.CauseDeleted, Keys: []int{1}}}, e.rec.take())
	})
	t.Run("write_locked_returns_key_is_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyIsLocked}, e.del([]int{1}, false))
		assert.True(t, e.state(t, 1).WriteLocked)
	})
	t.Run("read_locked_returns_key_is_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Status{l1.KeyIsLocked}, e.del([]int{1}, false))
	})
	t.Run("multiple_keys", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		e.read(t, []int{2}, 1)
		e.rec.take()
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyIsLocked, l1.KeyNotExist, l1.KeyNotExist},
			e.del([]int{1, 2, 3, 1}, false))
		assert.Equal(t, 1, e.m.Len())
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventRemoved, Cause: l1.CauseDeleted, Keys: []int{1}}}, e.rec.take())
	})
	t.Run("force_delete_removes_write_locked_key", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.OK}, e.del([]int{1}, true))
		assert.Zero(t, e.m.Len())
		assert.Equal(t, obj, e.used(), "the writer's block waits for it (forcedelete_test.go)")
		assert.Zero(t, e.m.Stats().WriteLocked)
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.abort([]int{1}))
	})
	t.Run("force_delete_removes_read_locked_key", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Status{l1.OK}, e.del([]int{1}, true))
		assert.Zero(t, e.m.Len())
		assert.Zero(t, e.m.Stats().TemporaryReadLocked)
	})
	t.Run("force_delete_missing_key_still_key_not_exist", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.del([]int{1}, true))
	})
}

func TestGetObjectState(t *testing.T) {
	t.Run("non_existing_returns_none", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		s, ok := e.m.State(1)
		assert.False(t, ok)
		assert.Zero(t, s)
	})
	t.Run("existing_returns_state", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, 3*KiB)
		assert.Equal(t, l1.ObjectState{Block: w[0].Block, Size: 3 * KiB, Finished: true, Evictable: true}, e.state(t, 1))
		assert.Equal(t, obj, w[0].Block.Size)
	})
	t.Run("write_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.reserve(t, []int{1}, obj)
		s := e.state(t, 1)
		assert.Equal(t, l1.ObjectState{
			Block: w[0].Block, Size: obj, WriteLocked: true,
			WriteExpiry: e.clk.Now().Add(l1.DefaultWriteTTL), WriteLease: w[0].Lease,
		}, s)
	})
	t.Run("read_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		r := e.read(t, []int{1}, 2)
		assert.Equal(t, l1.ObjectState{
			Block: w[0].Block, Size: obj, ReadLocks: 2, Finished: true,
			ReadExpiry: e.clk.Now().Add(l1.DefaultReadTTL), ReadLease: r[0].Lease,
		}, e.state(t, 1))
	})
	t.Run("snapshot_in_lru_order", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2, 3}, obj)
		e.read(t, []int{1}, 1)
		e.touch([]int{2, 9})
		snap := e.m.Snapshot()
		var got []int
		for _, en := range snap {
			got = append(got, en.Key)
			s, ok := e.m.State(en.Key)
			require.True(t, ok)
			assert.Equal(t, s, en.ObjectState)
		}
		assert.Equal(t, []int{3, 1, 2}, got)
		assert.Equal(t, []int{2}, e.rec.last(l1.EventAccessed))
	})
}

func TestClose(t *testing.T) {
	t.Run("empty_manager", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		require.NoError(t, e.m.Close())
		require.NoError(t, e.m.Close(), "idempotent")
	})
	t.Run("with_objects", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		e.reserve(t, []int{3}, obj)
		e.read(t, []int{1}, 1)
		e.rec.take()
		require.NoError(t, e.m.Close())
		assert.Zero(t, e.used())
		require.NoError(t, e.a.Verify())
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventRemoved, Cause: l1.CauseCleared, Keys: []int{2, 3, 1}}}, e.rec.take())
	})
	t.Run("clears_objects", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		require.NoError(t, e.m.Close())
		assert.Zero(t, e.m.Len())
		_, err := e.m.ReserveRead([]int{1}, 1)
		require.ErrorIs(t, err, l1.ErrClosed, "closed is not a miss")
		_, err = e.m.EvictTo(0)
		require.ErrorIs(t, err, l1.ErrClosed)
	})
	t.Run("reports_blocks_the_memory_refused", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		require.NoError(t, e.a.Close())
		err := e.m.Close()
		require.ErrorIs(t, err, allocator.ErrClosed)
		assert.Equal(t, uint64(1), e.m.Stats().FreeErrors)
	})
}

func TestClear(t *testing.T) {
	t.Run("keeps_locked_objects", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2, 3}, obj)
		e.read(t, []int{2}, 1)
		e.reserve(t, []int{4}, obj)
		assert.Equal(t, 2, e.m.Clear(false))
		assert.Equal(t, 2, e.m.Len())
		assert.Equal(t, 2*obj, e.used())
	})
	t.Run("force_removes_everything", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2, 3}, obj)
		e.read(t, []int{2}, 1)
		e.reserve(t, []int{4}, obj)
		assert.Equal(t, 4, e.m.Clear(true))
		assert.Zero(t, e.m.Len())
		assert.Equal(t, 2*obj, e.used(), "the holders' blocks wait for them")
		st := e.m.Stats()
		assert.Zero(t, st.WriteLocked)
		assert.Zero(t, st.Objects)
	})
}

func TestStateMachine(t *testing.T) {
	t.Run("full_write_read_cycle", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.reserve(t, []int{1}, obj)
		copy(e.a.Bytes(w[0].Block), "kv data")
		require.Equal(t, []l1.Status{l1.OK}, e.finish([]int{1}))
		r := e.read(t, []int{1}, 1)
		require.Equal(t, l1.OK, r[0].Status)
		assert.Equal(t, "kv data", string(e.a.Bytes(r[0].Block)[:7]))
		require.Equal(t, []l1.Status{l1.OK}, e.finishRead(t, []int{1}, 1))
		assert.True(t, e.m.IsEvictable(1))
	})
	t.Run("full_write_read_with_unsafe_read", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		assert.Equal(t, w[0].Block, e.unsafeRead([]int{1})[0].Block)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, l1.KeyNotReadable, e.unsafeRead([]int{1})[0].Status)
	})
	t.Run("delete_from_ready_state", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, []l1.Status{l1.OK}, e.del([]int{1}, false))
		assert.Equal(t, l1.KeyNotExist, e.read(t, []int{1}, 1)[0].Status)
	})
	t.Run("temporary_object_lifecycle", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		rs, err := e.m.ReserveWrite([]int{1}, []bool{true}, obj, l1.ModeAll)
		require.NoError(t, err)
		require.Equal(t, l1.OK, rs[0].Status)
		assert.True(t, e.state(t, 1).Temporary)
		_, err = e.fwrr([]int{1}, 1)
		require.NoError(t, err)
		assert.Equal(t, 1, e.m.Stats().TemporaryReadLocked)
		e.finishRead(t, []int{1}, 1)
		assert.Zero(t, e.m.Len())
		assert.Zero(t, e.used())
		assert.Zero(t, e.m.Stats().TemporaryReadLocked)
	})
	t.Run("temporary_object_with_unsafe_read", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		_, err := e.m.ReserveWrite([]int{1}, []bool{true}, obj, l1.ModeAll)
		require.NoError(t, err)
		f, err := e.fwrr([]int{1}, 1)
		require.NoError(t, err)
		assert.Equal(t, f, e.unsafeRead([]int{1}))
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, l1.KeyNotExist, e.unsafeRead([]int{1})[0].Status)
	})
	t.Run("multi_reader_lifecycle_with_shared_key", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		e.read(t, []int{1}, 1)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, l1.KeyNotWritable, e.reserve(t, []int{1}, obj)[0].Status)
		assert.Equal(t, l1.OK, e.unsafeRead([]int{1})[0].Status)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, l1.OK, e.reserve(t, []int{1}, obj)[0].Status)
	})
	t.Run("temp_object_multi_reader_deletion", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		e.read(t, []int{1}, 1)
		e.finishRead(t, []int{1}, 1)
		assert.Equal(t, 1, e.m.Len())
		e.finishRead(t, []int{1}, 1)
		assert.Zero(t, e.m.Len())
		assert.Zero(t, e.used())
	})
}

func TestIsKeyEvictable(t *testing.T) {
	t.Run("ready", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		assert.True(t, e.m.IsEvictable(1))
	})
	t.Run("write_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		assert.False(t, e.m.IsEvictable(1))
	})
	t.Run("read_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		assert.False(t, e.m.IsEvictable(1))
	})
	t.Run("nonexistent", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		assert.False(t, e.m.IsEvictable(1))
	})
	t.Run("after_read_unlock", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		e.finishRead(t, []int{1}, 1)
		assert.True(t, e.m.IsEvictable(1))
	})
	t.Run("after_write_unlock", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		e.finish([]int{1})
		assert.True(t, e.m.IsEvictable(1))
	})
	t.Run("mixed", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		e.reserve(t, []int{3}, obj)
		e.read(t, []int{2}, 1)
		got := []bool{e.m.IsEvictable(1), e.m.IsEvictable(2), e.m.IsEvictable(3), e.m.IsEvictable(4)}
		assert.Equal(t, []bool{true, false, false, false}, got)
	})
	t.Run("deleted", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.del([]int{1}, false)
		assert.False(t, e.m.IsEvictable(1))
	})
	t.Run("multiple_read_locks", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 3)
		e.finishRead(t, []int{1}, 2)
		assert.False(t, e.m.IsEvictable(1))
		e.finishRead(t, []int{1}, 1)
		assert.True(t, e.m.IsEvictable(1))
	})
	t.Run("unlocked_temporary", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		assert.True(t, e.m.IsEvictable(1), "finished and unlocked: nothing else would free it")
		assert.True(t, e.state(t, 1).Evictable)
		e.read(t, []int{1}, 1)
		assert.False(t, e.m.IsEvictable(1), "a read-locked temporary object waits for its reader")
	})
}

func TestStrings(t *testing.T) {
	for s := l1.OK; s <= l1.WriteLapsed; s++ {
		p, err := l1.ParseStatus(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, p)
	}
	assert.Equal(t, "KEY_NOT_EXIST", l1.KeyNotExist.String())
	assert.Equal(t, "Status(99)", l1.Status(99).String())
	_, err := l1.ParseStatus("nope")
	require.ErrorIs(t, err, l1.ErrInvalidArgument)

	for _, w := range l1.Modes {
		p, err := l1.ParseMode(w.String())
		require.NoError(t, err)
		assert.Equal(t, w, p)
	}
	assert.Equal(t, []string{"all", "new", "update"}, []string{l1.ModeAll.String(), l1.ModeNew.String(), l1.ModeUpdate.String()})
	_, err = l1.ParseMode("Mode(7)")
	require.ErrorIs(t, err, l1.ErrInvalidArgument)

	assert.Equal(t, "removed", l1.EventRemoved.String())
	assert.Equal(t, "evicted", l1.CauseEvicted.String())
}

// New over a typed nil *allocator.Allocator is ErrInvalidArgument, not a
// panic at the first call.
// From a hostile review.
func TestNewRejectsATypedNilAllocator(t *testing.T) {
	var a *allocator.Allocator
	_, err := l1.New[int](a, l1.Config{})
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
}

// After Close a read-side call must not answer KeyNotExist with a nil error:
// "closed" is not a miss.
// From a hostile review.
func TestReadSideCallsAfterCloseReturnErrClosed(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1}, obj)
	require.NoError(t, e.m.Close())
	one := []l1.Lease{1}
	_, err := e.m.ReserveRead([]int{1}, 1)
	assert.ErrorIs(t, err, l1.ErrClosed, "ReserveRead")
	_, err = e.m.FinishRead([]int{1}, one, 1)
	assert.ErrorIs(t, err, l1.ErrClosed, "FinishRead")
	_, err = e.m.FinishWriteAndReserveRead([]int{1}, one, 1)
	assert.ErrorIs(t, err, l1.ErrClosed, "FinishWriteAndReserveRead")
	_, err = e.m.FinishWrite([]int{1}, one)
	assert.ErrorIs(t, err, l1.ErrClosed, "FinishWrite")
	_, err = e.m.AbortWrite([]int{1}, one)
	assert.ErrorIs(t, err, l1.ErrClosed, "AbortWrite")
	_, err = e.m.UnsafeRead([]int{1})
	assert.ErrorIs(t, err, l1.ErrClosed, "UnsafeRead")
	_, err = e.m.Delete([]int{1}, true)
	assert.ErrorIs(t, err, l1.ErrClosed, "Delete")
	assert.ErrorIs(t, e.m.Touch([]int{1}), l1.ErrClosed, "Touch")
	_, err = e.m.ReserveWrite([]int{1}, nil, obj, l1.ModeAll)
	assert.ErrorIs(t, err, l1.ErrClosed, "ReserveWrite")
	_, err = e.m.EvictTo(0)
	assert.ErrorIs(t, err, l1.ErrClosed, "EvictTo")
	// Bad arguments are still named as such.
	_, err = e.m.FinishRead([]int{1}, nil, 1)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
}

// Stats counts objects by state, bytes, OOM keys, partial and failed grants,
// reservations, probes, evictions and expiries, without sweeping.
// From LMCache, whose telemetry had only used and total bytes.
func TestStats(t *testing.T) {
	e := newStrategyEnv(t, 16*obj, baseline.BinarySearch, l1.Config{EvictOnDemand: true})
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
	assert.Positive(t, e.probes())
	assert.Zero(t, st.Evictions)
	assert.Equal(t, 4, e.m.Len())
	assert.Equal(t, uint64(12), e.m.Stats().Expired)
	used, capacity := e.m.Usage()
	assert.Equal(t, 4*obj, used)
	assert.Equal(t, 16*obj, capacity)
}
