package trace

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// TestOutcomeIndependentOfBlockSize replays the start of the conversation
// trace with 4 KiB blocks and with production-size 8 MiB blocks in a pool
// of 45 GiB (5760 blocks; on linux a MAP_NORESERVE mapping, which costs no
// memory): l1 and the allocator must do exactly the same thing.
func TestOutcomeIndependentOfBlockSize(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a 45 GiB pool needs MAP_NORESERVE")
	}
	tr, err := ReadFile(conversation, 0)
	require.NoError(t, err)
	big := Options{BlockSize: 8 << 20, MaxRequests: 1000}
	big.Slots = Pool{Bytes: 45 << 30}.Slots(tr, big)
	require.EqualValues(t, 5760, big.Slots)
	small := big
	small.BlockSize = 4096
	for _, p := range []sim.Policy{Policies[0], Policies[2], Policies[3]} {
		a, err := Run(tr, p, small)
		require.NoError(t, err)
		b, err := Run(tr, p, big)
		require.NoError(t, err)
		require.EqualValues(t, 45<<30, b.PoolBytes)
		require.Positive(t, a.Evictions, p.Name)
		oa, ob := outcome(a), outcome(b)
		oa.PoolBytes, ob.PoolBytes = 0, 0
		oa.MeanFrag, ob.MeanFrag = 0, 0 // fragmentation is a byte ratio: equal up to rounding
		oa.PeakFrag, ob.PeakFrag = 0, 0
		require.InDelta(t, a.MeanFrag, b.MeanFrag, 1e-9, p.Name)
		require.Equal(t, oa, ob, p.Name)
	}
}

func TestNoReserveRegion(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("a heap region elsewhere")
	}
	r, err := newPoolRegion(64 << 30)
	require.NoError(t, err)
	require.Len(t, r.Bytes(), 64<<30)
	require.NoError(t, r.Close())
	require.Nil(t, r.Bytes())
	require.NoError(t, r.Close())
	_, err = newPoolRegion(0)
	require.ErrorIs(t, err, ErrOptions)
}
