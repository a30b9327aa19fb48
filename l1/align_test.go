package l1_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// The memory's alignment, from a Sizer or a Coalescer, is validated at New
// and rounds sizes correctly whether or not it is a power of two.

// sizedMem is upToMem that reports its capacity and an alignment.
type sizedMem struct {
	*upToMem
	align int64
}

func (s *sizedMem) Capacity() int64 { return int64(s.capacity) * s.objSize }
func (s *sizedMem) Align() int64    { return s.align }

// coalMem is countMem with Fit and FreeAround (a Coalescer), no Capacity.
type coalMem struct {
	*countMem
	align int64
}

func (c *coalMem) Fit(size int64, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return min(n, c.capacity-len(c.live))
}
func (c *coalMem) FreeAround(allocator.Block) (before, after int64) { return 0, 0 }
func (c *coalMem) Align() int64                                     { return c.align }

func TestAlignValidated(t *testing.T) {
	for _, align := range []int64{0, -1, math.MinInt64} {
		mems := map[string]l1.Memory{
			"sizer":     &sizedMem{upToMem: &upToMem{countMem: newCountMem(10, obj)}, align: align},
			"coalescer": &coalMem{countMem: newCountMem(10, obj), align: align},
		}
		for name, mem := range mems {
			m, err := l1.New[int](mem, l1.Config{EvictOnDemand: true})
			require.ErrorIs(t, err, l1.ErrInvalidArgument, "%s with Align %d", name, align)
			assert.Nil(t, m)
		}
	}
}

// A slab of ten 3 KiB slots: its unit is not a power of two, and a batch
// of twelve 3 KiB objects gets the ten that fit (a bit mask rounded 3072
// up to 5120 and granted six), with and without on-demand eviction.
func TestAlignNotPowerOfTwo(t *testing.T) {
	const slot = 3 * KiB
	for _, evict := range []bool{false, true} {
		mem := &sizedMem{upToMem: &upToMem{countMem: newCountMem(10, slot)}, align: slot}
		e := newEnvOver(t, nil, mem, l1.Config{EvictOnDemand: evict})
		rs := e.reserve(t, keys(0, 12), slot)
		assert.Equal(t, append(repeat(l1.OK, 10), repeat(l1.OutOfMemory, 2)...), statuses(rs), "evict on demand %v", evict)
	}
	// On-demand eviction over a Coalescer counts in the same unit: one
	// victim of 3 KiB makes room for one 3 KiB object.
	mem := &coalMem{countMem: newCountMem(4, slot), align: slot}
	e := newEnvOver(t, nil, mem, l1.Config{EvictOnDemand: true})
	e.put(t, keys(0, 4), slot)
	rs := e.reserve(t, keys(10, 1), slot)
	assert.Equal(t, []l1.Status{l1.OK}, statuses(rs))
	assert.Equal(t, uint64(1), e.m.Stats().OnDemandEvictions)
}
