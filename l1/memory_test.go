package l1_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// Memories that misbehave, or that someone else shares.

// shrinkMem loses capacity to another user after a number of calls.
type shrinkMem struct {
	*countMem
	after, to int
}

func (s *shrinkMem) AppendBatch(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	s.mu.Lock()
	if len(s.calls) == s.after {
		s.capacity = s.to
	}
	s.mu.Unlock()
	return s.countMem.AppendBatch(dst, size, n, p)
}

// liarMem returns the wrong number of blocks.
type liarMem struct {
	*countMem
	extra int
	err   error
}

func (l *liarMem) AppendBatch(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	return l.countMem.AppendBatch(dst, size, n+l.extra, p)
}

func (l *liarMem) AppendUpTo(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	if l.err != nil {
		return dst, l.err
	}
	return l.countMem.AppendUpTo(dst, size, n+l.extra, p)
}

func TestSharedMemory(t *testing.T) {
	t.Run("search_resumes_when_memory_shrinks_before_the_final_allocation", func(t *testing.T) {
		// Capacity 7, want 10: probes 5, 7, 8; before the final 7 another
		// user takes 2, so the search resumes over [1, 6] and grants 5.
		mem := &shrinkMem{countMem: newCountMem(7, obj), after: 4, to: 5}
		e := newEnvOver(t, nil, under(baseline.BinarySearch, mem, l1.Config{}), l1.Config{})
		rs := e.reserve(t, keys(0, 10), obj)
		assert.Equal(t, append(repeat(l1.OK, 5), repeat(l1.OutOfMemory, 5)...), statuses(rs))
		calls, _ := mem.record()
		assert.Equal(t, []int{10, 5, 7, 8, 7, 3, 5, 6, 5}, calls)
		assert.Equal(t, int64(5), mem.Stats().LiveBlocks)
	})
}

func TestMisbehavingMemory(t *testing.T) {
	t.Run("batch_with_the_wrong_count", func(t *testing.T) {
		// On-demand eviction allocates with AppendBatch.
		mem := &liarMem{countMem: newCountMem(10, obj), extra: 1}
		e := newEnvOver(t, nil, mem, l1.Config{EvictOnDemand: true})
		_, err := e.m.ReserveWrite(keys(0, 3), nil, obj, l1.ModeAll)
		require.Error(t, err)
		assert.Zero(t, mem.Stats().LiveBlocks, "the extra blocks are returned")
		assert.Zero(t, e.m.Len())
	})
	t.Run("up_to_with_too_many", func(t *testing.T) {
		mem := &liarMem{countMem: newCountMem(10, obj), extra: 1}
		e := newEnvOver(t, nil, mem, l1.Config{})
		_, err := e.m.ReserveWrite(keys(0, 3), nil, obj, l1.ModeAll)
		require.Error(t, err)
		assert.Zero(t, mem.Stats().LiveBlocks)
	})
	for _, upTo := range []bool{false, true} {
		t.Run(fmt.Sprintf("a_block_too_small/up_to=%v", upTo), func(t *testing.T) {
			// The memory hands out a block a byte short of the size
			// asked for: a writer would write past it into its
			// neighbour's. The call fails, the blocks go back, and
			// nothing is reserved. Without on-demand eviction the call
			// is AppendUpTo, with it AppendBatch.
			mem := &shortMem{countMem: newCountMem(10, obj)}
			e := newEnvOver(t, nil, mem, l1.Config{EvictOnDemand: !upTo})
			_, err := e.m.ReserveWrite(keys(0, 3), nil, obj, l1.ModeAll)
			require.ErrorContains(t, err, "bytes for objects of")
			assert.Zero(t, mem.Stats().LiveBlocks, "the blocks are returned")
			assert.Zero(t, e.m.Len())
		})
	}
	t.Run("up_to_error", func(t *testing.T) {
		mem := &liarMem{countMem: newCountMem(10, obj), err: errBroken}
		e := newEnvOver(t, nil, mem, l1.Config{})
		_, err := e.m.ReserveWrite(keys(0, 3), nil, obj, l1.ModeAll)
		require.ErrorIs(t, err, errBroken)
	})
	t.Run("free_refused_during_a_probe", func(t *testing.T) {
		mem := newCountMem(5, obj)
		e := newEnvOver(t, nil, under(baseline.BinarySearch, &refuseFree{mem}, l1.Config{}), l1.Config{})
		_, err := e.m.ReserveWrite(keys(0, 10), nil, obj, l1.ModeAll)
		require.ErrorIs(t, err, errBroken)
		assert.Zero(t, e.m.Len())
	})
}

// shortMem returns a last block one byte smaller than asked for.
type shortMem struct{ *countMem }

func (s *shortMem) AppendBatch(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	return shorten(s.countMem.AppendBatch(dst, size, n, p))
}

func (s *shortMem) AppendUpTo(dst []allocator.Block, size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	return shorten(s.countMem.AppendUpTo(dst, size, n, p))
}

func shorten(bs []allocator.Block, err error) ([]allocator.Block, error) {
	if err == nil && len(bs) > 0 {
		bs[len(bs)-1].Size--
	}
	return bs, err
}

// Free takes back the shortened block by its offset.
func (s *shortMem) Free(blocks ...allocator.Block) error {
	for i := range blocks {
		blocks[i].Size = obj
	}
	return s.countMem.Free(blocks...)
}

type refuseFree struct{ *countMem }

func (refuseFree) Free(...allocator.Block) error { return errBroken }

// A clock that goes backwards stops the manager's time until it moves
// forward again, so the expiry queues stay ordered and the sweep reclaims
// everything that lapsed.
func TestClockGoingBackwards(t *testing.T) {
	// Manager times; write TTL 60 s, read TTL 70 s.
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: time.Minute, ReadTTL: 70 * time.Second})
	e.reserve(t, []int{1}, obj) // write expires at 60
	e.clk.Advance(-30 * time.Second)
	e.reserve(t, []int{2}, obj) // still 0: expires at 60 too
	e.putTemp(t, []int{3, 4}, obj)
	e.read(t, []int{3}, 1) // read expires at 70
	e.clk.Advance(-10 * time.Second)
	e.read(t, []int{4}, 1) // 70
	e.clk.Advance(65 * time.Second)
	assert.Equal(t, 2, e.m.Len(), "the write locks lapsed at 60, the reads still hold")
	e.clk.Advance(5 * time.Second)
	assert.Zero(t, e.m.Len())
	assert.Equal(t, uint64(4), e.m.Stats().Expired)
}

// refuseOne refuses, all or nothing, any Free that includes one block.
type refuseOne struct {
	*countMem
	bad int64 // the offset refused
}

func (r *refuseOne) Free(blocks ...allocator.Block) error {
	for _, b := range blocks {
		if b.Offset == r.bad {
			return errBroken
		}
	}
	return r.countMem.Free(blocks...)
}

// The blocks of one call's removals are freed together; a block the memory
// refuses neither keeps the others nor hides from FreeErrors.
func TestFreeRefused(t *testing.T) {
	t.Run("one_block_of_a_delete", func(t *testing.T) {
		mem := &refuseOne{countMem: newCountMem(10, obj)}
		e := newEnvOver(t, nil, mem, l1.Config{})
		rs := e.put(t, keys(0, 4), obj)
		mem.bad = rs[1].Block.Offset
		assert.Equal(t, repeat(l1.OK, 4), e.del(keys(0, 4), false))
		assert.Equal(t, uint64(1), e.m.Stats().FreeErrors)
		assert.Zero(t, e.m.Len())
		assert.Equal(t, int64(1), mem.Stats().LiveBlocks, "only the refused block is still live")
		err := e.m.Close()
		require.NoError(t, err, "Close reports only its own refusals")
	})
	t.Run("every_block_counts", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, keys(0, 3), obj)
		require.NoError(t, e.a.Close())
		err := e.m.Close()
		require.ErrorIs(t, err, allocator.ErrClosed)
		assert.ErrorContains(t, err, "3 blocks not freed")
		assert.Equal(t, uint64(3), e.m.Stats().FreeErrors)
	})
}
