package l1_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

// The memory's alignment and capacity are validated at New, and the
// alignment rounds sizes correctly whether or not it is a power of two.

// sizedMem is countMem that reports its capacity, as the allocator does.
type sizedMem struct{ *countMem }

func (s sizedMem) Capacity() int64 { return int64(s.capacity) * s.objSize }

// aligned returns a countMem of capacity objects of objSize bytes whose
// unit is align.
func aligned(capacity int, objSize, align int64) *countMem {
	c := newCountMem(capacity, objSize)
	c.align = align
	return c
}

func TestAlignValidated(t *testing.T) {
	for _, align := range []int64{0, -1, math.MinInt64} {
		mems := map[string]l1.Memory{
			"unbounded": aligned(10, obj, align),
			"sized":     sizedMem{aligned(10, obj, align)},
		}
		for name, mem := range mems {
			m, err := l1.New[int](mem, l1.Config{EvictOnDemand: true})
			require.ErrorIs(t, err, l1.ErrInvalidArgument, "%s with Align %d", name, align)
			assert.Nil(t, m)
		}
	}
}

// shrunkMem reports a Capacity below the capacity its Stats say is
// usable now.
type shrunkMem struct{ *countMem }

func (s shrunkMem) Capacity() int64 { return int64(s.capacity)*s.objSize - 1 }

func TestCapacityValidated(t *testing.T) {
	m, err := l1.New[int](shrunkMem{newCountMem(10, obj)}, l1.Config{})
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.ErrorContains(t, err, "usable now")
	assert.Nil(t, m)
	_, err = l1.New[int](sizedMem{newCountMem(10, obj)}, l1.Config{})
	require.NoError(t, err, "a Capacity equal to the usable capacity")
}

// A slab of ten 3 KiB slots: its unit is not a power of two, and a batch
// of twelve 3 KiB objects gets the ten that fit (a bit mask rounded 3072
// up to 5120 and granted six), with and without on-demand eviction.
func TestAlignNotPowerOfTwo(t *testing.T) {
	const slot = 3 * KiB
	for _, evict := range []bool{false, true} {
		mem := sizedMem{aligned(10, slot, slot)}
		e := newEnvOver(t, nil, mem, l1.Config{EvictOnDemand: evict})
		rs := e.reserve(t, keys(0, 12), slot)
		assert.Equal(t, append(repeat(l1.OK, 10), repeat(l1.OutOfMemory, 2)...), statuses(rs), "evict on demand %v", evict)
	}
	// On-demand eviction counts in the same unit: one victim of 3 KiB
	// makes room for one 3 KiB object.
	mem := aligned(4, slot, slot)
	e := newEnvOver(t, nil, mem, l1.Config{EvictOnDemand: true})
	e.put(t, keys(0, 4), slot)
	rs := e.reserve(t, keys(10, 1), slot)
	assert.Equal(t, []l1.Status{l1.OK}, statuses(rs))
	assert.Equal(t, uint64(1), e.m.Stats().OnDemandEvictions)
}
