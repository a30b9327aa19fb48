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
// reserve_write, finish_write, abort_write and
// finish_write_and_reserve_read, by name, plus this package's additions.

func TestReserveWrite(t *testing.T) {
	t.Run("new_key_returns_success", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		rs := e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Result{{Status: l1.OK, Block: allocator.Block{Offset: 0, Size: obj, Gen: 1}, Lease: 1}}, rs)
		s := e.state(t, 1)
		assert.True(t, s.WriteLocked)
		assert.False(t, s.Finished)
		assert.Equal(t, []int{1}, e.rec.last(l1.EventWriteReserved))
	})
	t.Run("write_locked_key_returns_not_writable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyNotWritable}, statuses(e.reserve(t, []int{1}, obj)))
	})
	t.Run("read_locked_key_returns_not_writable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		assert.Equal(t, []l1.Status{l1.KeyNotWritable}, statuses(e.reserve(t, []int{1}, obj)))
	})
	t.Run("temporary_key_returns_not_writable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.putTemp(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyNotWritable}, statuses(e.reserve(t, []int{1}, obj)))
	})
	t.Run("multiple_keys", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{2}, obj)
		e.read(t, []int{2}, 1)
		rs := e.reserve(t, []int{1, 2, 3}, obj)
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotWritable, l1.OK}, statuses(rs))
		assert.NotEqual(t, rs[0].Block, rs[2].Block)
		assert.Equal(t, []int{1, 3}, e.rec.last(l1.EventWriteReserved))
	})
	t.Run("uses_available_prefix", func(t *testing.T) {
		for _, s := range []baseline.Strategy{baseline.OnePass, baseline.BinarySearch} {
			t.Run(s.String(), func(t *testing.T) {
				e := newStrategyEnv(t, 64*KiB, s, l1.Config{}) // 16 pages
				e.put(t, keys(100, 12), obj)
				rs := e.reserve(t, keys(0, 6), obj)
				assert.Equal(t, append(repeat(l1.OK, 4), repeat(l1.OutOfMemory, 2)...), statuses(rs))
				assert.Equal(t, keys(0, 4), e.rec.last(l1.EventWriteReserved))
			})
		}
	})
	t.Run("new_mode", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		rs, err := e.m.ReserveWrite([]int{1, 2}, nil, obj, l1.ModeNew)
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.KeyNotWritable, l1.OK}, statuses(rs))
		s := e.state(t, 1)
		assert.False(t, s.WriteLocked)
		assert.Equal(t, w[0].Block, s.Block)
	})
	t.Run("update_mode", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		before := e.a.Stats().Allocs
		rs, err := e.m.ReserveWrite([]int{1, 2}, nil, obj, l1.ModeUpdate)
		require.NoError(t, err)
		assert.Equal(t, []l1.Result{{Status: l1.OK, Block: w[0].Block, Lease: w[0].Lease + 1}, {Status: l1.KeyNotWritable}}, rs)
		assert.Equal(t, before, e.a.Stats().Allocs, "update mode allocates nothing")
		s := e.state(t, 1)
		assert.True(t, s.WriteLocked)
		assert.True(t, s.Finished, "a rewrite keeps the finished flag")
		_, ok := e.m.State(2)
		assert.False(t, ok)
	})
	t.Run("all_mode", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		rs := e.reserve(t, []int{1, 2}, obj)
		assert.Equal(t, []l1.Status{l1.OK, l1.OK}, statuses(rs))
		assert.Equal(t, w[0].Block, rs[0].Block, "a re-locked key keeps its block")
		assert.Equal(t, []int{1, 2}, e.rec.last(l1.EventWriteReserved))
	})
	t.Run("existing_block_too_small_is_not_writable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyNotWritable}, statuses(e.reserve(t, []int{1}, obj+1)))
		// A smaller write fits the old block.
		assert.Equal(t, []l1.Status{l1.OK}, statuses(e.reserve(t, []int{1}, obj/2)))
		assert.Equal(t, obj/2, e.state(t, 1).Size)
	})
	t.Run("rewrite_keeps_the_objects_temporary_flag", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		rs, err := e.m.ReserveWrite([]int{1}, []bool{true}, obj, l1.ModeAll)
		require.NoError(t, err)
		assert.Equal(t, l1.OK, rs[0].Status)
		assert.False(t, e.state(t, 1).Temporary)
	})
	t.Run("empty_batch", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		rs := e.reserve(t, nil, obj)
		assert.Empty(t, rs)
		assert.Zero(t, e.m.Stats().AllocCalls)
		assert.Empty(t, e.rec.take())
	})
	t.Run("invalid_arguments_change_nothing", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		before, stats := e.m.Snapshot(), e.m.Stats()
		e.rec.take()
		for name, call := range map[string]func() ([]l1.Result, error){
			"zero size":     func() ([]l1.Result, error) { return e.m.ReserveWrite([]int{1, 2}, nil, 0, l1.ModeAll) },
			"negative size": func() ([]l1.Result, error) { return e.m.ReserveWrite([]int{1, 2}, nil, -obj, l1.ModeAll) },
			"unknown mode":  func() ([]l1.Result, error) { return e.m.ReserveWrite([]int{1, 2}, nil, obj, l1.Mode(9)) },
			"short flags": func() ([]l1.Result, error) {
				return e.m.ReserveWrite([]int{1, 2}, []bool{true}, obj, l1.ModeAll)
			},
			"long flags": func() ([]l1.Result, error) {
				return e.m.ReserveWrite([]int{1, 2}, []bool{true, false, true}, obj, l1.ModeAll)
			},
		} {
			rs, err := call()
			require.ErrorIs(t, err, l1.ErrInvalidArgument, name)
			assert.Nil(t, rs, name)
		}
		assert.Equal(t, before, e.m.Snapshot())
		assert.Equal(t, stats, e.m.Stats())
		assert.Empty(t, e.rec.take())
	})
	t.Run("size_above_capacity_is_out_of_memory", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		rs := e.reserve(t, keys(0, 3), 65*KiB)
		assert.Equal(t, repeat(l1.OutOfMemory, 3), statuses(rs))
		assert.Equal(t, uint64(3), e.m.Stats().OOMKeys)
	})
	t.Run("allocator_error_is_returned_and_undone", func(t *testing.T) {
		for _, s := range baseline.Strategies {
			t.Run(s.String(), func(t *testing.T) {
				mem := newCountMem(10, obj)
				e := newEnvOver(t, nil, under(s, mem, l1.Config{}), l1.Config{})
				e.put(t, []int{1}, obj)
				before := e.m.Snapshot()
				e.rec.take()
				mem.fail = errBroken
				rs, err := e.m.ReserveWrite([]int{1, 2, 3}, nil, obj, l1.ModeAll)
				require.ErrorIs(t, err, errBroken)
				assert.Nil(t, rs)
				assert.Equal(t, before, e.m.Snapshot(), "the re-lock of key 1 is not applied")
				assert.Empty(t, e.rec.take())
				assert.Equal(t, int64(1), mem.Stats().LiveBlocks)
			})
		}
	})
	t.Run("allocator_error_or_panic_leaves_no_key_behind", func(t *testing.T) {
		for _, panics := range []bool{false, true} {
			mem := &panicMem{countMem: newCountMem(10, obj)}
			e := newEnvOver(t, nil, mem, l1.Config{})
			e.put(t, []int{1}, obj)
			mem.fail, mem.panics = errBroken, panics
			func() {
				defer func() {
					assert.Equal(t, panics, recover() != nil)
				}()
				_, err := e.m.ReserveWrite([]int{2, 1, 3, 2, 3}, nil, obj, l1.ModeAll)
				require.ErrorIs(t, err, errBroken)
			}()
			assert.Equal(t, 1, e.m.Len(), "panics %v", panics)
			_, ok := e.m.State(2)
			assert.False(t, ok)
			mem.fail, mem.panics = nil, false
			rs := e.reserve(t, []int{3, 2, 3}, obj)
			assert.Equal(t, []l1.Status{l1.OK, l1.OK, l1.KeyNotWritable}, statuses(rs))
			assert.Equal(t, 3, e.m.Len())
		}
	})
	t.Run("allocator_error_in_a_probe_frees_the_probes", func(t *testing.T) {
		mem := &failAfter{countMem: newCountMem(5, obj), after: 3}
		e := newEnvOver(t, nil, under(baseline.BinarySearch, mem, l1.Config{}), l1.Config{})
		_, err := e.m.ReserveWrite(keys(0, 10), nil, obj, l1.ModeAll)
		require.ErrorIs(t, err, errBroken)
		assert.Zero(t, mem.Stats().LiveBlocks)
		assert.Zero(t, e.m.Len())
	})
	t.Run("after_close", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		require.NoError(t, e.m.Close())
		_, err := e.m.ReserveWrite([]int{1}, nil, obj, l1.ModeAll)
		require.ErrorIs(t, err, l1.ErrClosed)
	})
}

// failAfter fails every allocation after the first `after` calls with a
// non-OOM error.
type failAfter struct {
	*countMem
	after int
}

func (f *failAfter) AppendBatch(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	f.mu.Lock()
	calls := len(f.calls)
	f.mu.Unlock()
	if calls >= f.after {
		return dst, errBroken
	}
	return f.countMem.AppendBatch(dst, size, n, p)
}

func TestFinishWrite(t *testing.T) {
	t.Run("non_existing_key_returns_key_not_exist", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		assert.Equal(t, []l1.Status{l1.KeyNotExist}, e.finish([]int{1}))
	})
	t.Run("success", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.OK}, e.finish([]int{1}))
		s := e.state(t, 1)
		assert.False(t, s.WriteLocked)
		assert.True(t, s.Finished)
		assert.Equal(t, []int{1}, e.rec.last(l1.EventWriteFinished))
	})
	t.Run("non_write_locked_returns_wrong_state", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyInWrongState}, e.finish([]int{1}))
	})
}

func TestAbortWrite(t *testing.T) {
	t.Run("discards_reserved_object", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		e.rec.take()
		assert.Equal(t, []l1.Status{l1.OK}, e.abort([]int{1}))
		_, ok := e.m.State(1)
		assert.False(t, ok)
		assert.Zero(t, e.used())
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventRemoved, Cause: l1.CauseAborted, Keys: []int{1}}}, e.rec.take())
	})
	t.Run("preserves_finished_object", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.KeyInWrongState, l1.KeyNotExist}, e.abort([]int{1, 2}))
		s := e.state(t, 1)
		assert.True(t, s.Finished)
		assert.Equal(t, w[0].Block, s.Block)
	})
	t.Run("discards_a_rewrite", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []l1.Status{l1.OK}, e.abort([]int{1}))
		assert.Zero(t, e.m.Len())
		assert.Zero(t, e.used())
	})
}

func TestFinishWriteAndReserveRead(t *testing.T) {
	t.Run("normal_transition", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.reserve(t, []int{1}, obj)
		rs, err := e.fwrr([]int{1}, 2)
		require.NoError(t, err)
		assert.Equal(t, []l1.Result{{Status: l1.OK, Block: w[0].Block, Lease: w[0].Lease + 1}}, rs)
		assert.Equal(t, rs[0].Lease, e.state(t, 1).ReadLease, "a new read epoch")
		s := e.state(t, 1)
		assert.False(t, s.WriteLocked)
		assert.True(t, s.Finished)
		assert.Equal(t, 2, s.ReadLocks)
		assert.Equal(t, []int{1}, e.rec.last(l1.EventWriteFinishedReadReserved))
	})
	t.Run("key_not_exist", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		rs, err := e.fwrr([]int{1}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Result{{Status: l1.KeyNotExist}}, rs)
	})
	t.Run("not_write_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		rs, err := e.fwrr([]int{1}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Result{{Status: l1.KeyInWrongState}}, rs)
		assert.Equal(t, 0, e.state(t, 1).ReadLocks)
	})
	t.Run("already_read_locked", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.read(t, []int{1}, 1)
		rs, err := e.fwrr([]int{1}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Result{{Status: l1.KeyInWrongState}}, rs)
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
	})
	t.Run("multiple_keys_mixed_results", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{2}, obj)
		e.reserve(t, []int{1, 3}, obj)
		rs, err := e.fwrr([]int{1, 2, 3, 4}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyInWrongState, l1.OK, l1.KeyNotExist}, statuses(rs))
		assert.Equal(t, []int{1, 3}, e.rec.last(l1.EventWriteFinishedReadReserved))
	})
	t.Run("can_unsafe_read_after_transition", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.reserve(t, []int{1}, obj)
		rs, err := e.fwrr([]int{1}, 1)
		require.NoError(t, err)
		assert.Equal(t, []l1.Result{{Status: l1.OK, Block: w[0].Block, Lease: rs[0].Lease}}, e.unsafeRead([]int{1}))
	})
	t.Run("locks_outside_range_is_an_error", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		_, err := e.fwrr([]int{1}, 0)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		assert.True(t, e.state(t, 1).WriteLocked)
	})
}

// panicMem is countMem whose allocations panic with fail instead of
// returning it when panics is set.
type panicMem struct {
	*countMem
	panics bool
}

func (p *panicMem) AppendBatch(dst []allocator.Block, size int64, n int, pl allocator.Placement) ([]allocator.Block, error) {
	return p.panicOn(p.countMem.AppendBatch(dst, size, n, pl))
}

func (p *panicMem) AppendUpTo(dst []allocator.Block, size int64, n int, pl allocator.Placement) ([]allocator.Block, error) {
	return p.panicOn(p.countMem.AppendUpTo(dst, size, n, pl))
}

func (p *panicMem) panicOn(blocks []allocator.Block, err error) ([]allocator.Block, error) {
	if err != nil && p.panics {
		panic(err)
	}
	return blocks, err
}

// TestReserveWriteRepeatsPastThePrefix names missing keys twice in one
// call, some inside the granted prefix and some past it, on a 45 GiB
// NoReserve-sized budget of 8 MiB objects with room for 2: a repeat answers
// KeyNotWritable wherever its first occurrence landed, a refused key holds
// no record (a later call finds it missing and can take it), and the
// manager's bytes and objects are exactly the granted ones.
func TestReserveWriteRepeatsPastThePrefix(t *testing.T) {
	const obj = 8 * MiB
	for _, s := range baseline.Strategies {
		t.Run(s.String(), func(t *testing.T) {
			e := newStrategyEnv(t, 2*obj, s, l1.Config{})
			ks := []int{1, 2, 1, 3, 2, 3, 4, 4}
			rs, err := e.m.ReserveWrite(ks, nil, obj, l1.ModeAll)
			require.NoError(t, err)
			want := []l1.Status{l1.OK, l1.OK, l1.KeyNotWritable, l1.OutOfMemory, l1.KeyNotWritable, l1.KeyNotWritable, l1.OutOfMemory, l1.KeyNotWritable}
			if s == baseline.None {
				want = []l1.Status{l1.OutOfMemory, l1.OutOfMemory, l1.KeyNotWritable, l1.OutOfMemory, l1.KeyNotWritable, l1.KeyNotWritable, l1.OutOfMemory, l1.KeyNotWritable}
			}
			require.Equal(t, want, statuses(rs))
			granted := 0
			for _, r := range rs {
				if r.Status == l1.OK {
					granted++
				}
			}
			assert.Equal(t, granted, e.m.Len())
			assert.Equal(t, int64(granted)*obj, e.a.Stats().Used)
			for _, k := range []int{3, 4} {
				_, ok := e.m.State(k)
				assert.False(t, ok, "refused key %d holds no record", k)
			}
			// A late second writer: once the first aborts, the refused
			// keys fit and the repeats still answer KeyNotWritable.
			if granted > 0 {
				sts, err := e.m.AbortWrite(ks[:2], []l1.Lease{rs[0].Lease, rs[1].Lease})
				require.NoError(t, err)
				require.Equal(t, []l1.Status{l1.OK, l1.OK}, sts)
			}
			rs, err = e.m.ReserveWrite([]int{3, 4, 3}, nil, obj, l1.ModeAll)
			require.NoError(t, err)
			require.Equal(t, []l1.Status{l1.OK, l1.OK, l1.KeyNotWritable}, statuses(rs))
		})
	}
}

// A key repeated within one ReserveWrite is reserved once, with its first
// occurrence's flag; later occurrences answer KeyNotWritable.
// From LMCache, which allocated it twice and leaked one buffer.
func TestDuplicateKeysAllocateOnce(t *testing.T) {
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
			require.NoError(t, e.m.Close(), "Close frees the blocks, locked or not")
			assert.Zero(t, e.used())
		})
	}
}

// Keys and temporary flags of different lengths are ErrInvalidArgument and
// change nothing.
// From LMCache, whose zip(strict=False) truncated the longer list.
func TestMismatchedLengthsAreRejected(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	for _, flags := range [][]bool{{true}, {true, false, true}} {
		rs, err := e.m.ReserveWrite([]int{1, 2}, flags, obj, l1.ModeAll)
		require.ErrorIs(t, err, l1.ErrInvalidArgument)
		assert.Nil(t, rs)
	}
	assert.Zero(t, e.m.Len())
	assert.Zero(t, e.m.Stats().AllocCalls)
}

// A write is invisible to readers until FinishWrite, a rewrite of a finished
// object included.
// From LMCache's L1 manager, one of the weaknesses this package fixes.
func TestUnfinishedWritesAreInvisible(t *testing.T) {
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

// A ModeAll batch with temporary=true re-locks cached objects without
// turning them into read-once objects.
// From a hostile review.
func TestRelockKeepsTheObjectsTemporaryFlag(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1}, obj)
	rs, err := e.m.ReserveWrite([]int{1, 2}, []bool{true, true}, obj, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, []l1.Status{l1.OK, l1.OK}, statuses(rs))
	assert.False(t, e.state(t, 1).Temporary, "the cached object keeps its own flag")
	assert.True(t, e.state(t, 2).Temporary, "a new object takes the call's flag")
}
