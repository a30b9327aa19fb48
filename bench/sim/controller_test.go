package sim

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// fullPool returns a manager over a pool of n objects of 4 KiB, all
// stored and finished, the first one read-locked when locked.
func fullPool(t *testing.T, n int, locked bool) *l1.Manager[int] {
	t.Helper()
	r, err := hostmem.NewHeapRegion(int64(n) * 4096)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	m, err := NewManager[int](Policy{}, a, l1.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	keys := make([]int, n)
	for i := range keys {
		keys[i] = i
	}
	rs, err := m.ReserveWrite(keys, nil, 4096, l1.ModeNew)
	require.NoError(t, err)
	leases := make([]l1.Lease, n)
	for i, x := range rs {
		require.Equal(t, l1.OK, x.Status)
		leases[i] = x.Lease
	}
	_, err = m.FinishWrite(keys, leases)
	require.NoError(t, err)
	if locked {
		_, err = m.ReserveRead(keys[:1], 1)
		require.NoError(t, err)
	}
	return m.Manager
}

// TestControllerMeasures: of 7 objects, a fifth is 1.4; counting keys
// evicts ⌊1.4⌋ = 1, counting bytes ⌈1.4⌉ = 2, least recently used first
// and never a locked object.
func TestControllerMeasures(t *testing.T) {
	for _, c := range []struct {
		m       Measure
		locked  bool
		evicted int
		calls   int
		left    []int
	}{
		{Keys, false, 1, 3, []int{1, 2, 3, 4, 5, 6}},
		{Bytes, false, 2, 2, []int{2, 3, 4, 5, 6}},
		{Keys, true, 1, 3, []int{0, 2, 3, 4, 5, 6}},
		{Bytes, true, 2, 2, []int{0, 3, 4, 5, 6}},
	} {
		m := fullPool(t, 7, c.locked)
		ctl := DefaultController
		ctl.Measure = c.m
		tick, err := ctl.Tick(m)
		require.NoError(t, err)
		require.Equal(t, Tick{Reached: true, Evicted: c.evicted, Calls: c.calls}, tick, "%+v", c)
		var left []int
		for _, e := range m.Snapshot() {
			left = append(left, e.Key)
		}
		require.ElementsMatch(t, c.left, left, "%+v", c)
	}
}

// TestControllerBelowWatermark: at 6 of 8 objects (75 %) the controller
// at 0.8 does nothing, and at 1 object a fifth of the keys is none.
func TestControllerBelowWatermark(t *testing.T) {
	m := fullPool(t, 8, false)
	_, err := m.Delete([]int{0, 1}, false)
	require.NoError(t, err)
	for _, ms := range []Measure{Keys, Bytes} {
		tick, err := Controller{Watermark: 0.8, Ratio: 0.2, Measure: ms}.Tick(m)
		require.NoError(t, err)
		require.Equal(t, Tick{Calls: 1}, tick)
	}
	tick, err := Controller{Watermark: 0.8, Ratio: 0.2}.Tick(fullPool(t, 1, false))
	require.NoError(t, err)
	require.Equal(t, Tick{Reached: true, Calls: 2}, tick, "⌊0.2 × 1⌋ = 0 keys: no EvictTo")
}

// failing is an Evictor whose EvictTo fails.
type failing struct{}

func (failing) Usage() (int64, int64)        { return 10, 10 }
func (failing) Len() int                     { return 10 }
func (failing) EvictTo(float64) (int, error) { return 0, errTest }

var errTest = errors.New("test")

func TestControllerError(t *testing.T) {
	tick, err := DefaultController.Tick(failing{})
	require.ErrorIs(t, err, errTest)
	require.True(t, tick.Reached)
}
