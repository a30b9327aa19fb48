package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// TestNewManagerAppliesEveryField: each field of Policy reaches the
// manager's Config, and base's lock lifetimes and clock survive.
func TestNewManagerAppliesEveryField(t *testing.T) {
	r, err := hostmem.NewHeapRegion(1 << 20)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer a.Close()
	var clock Clock
	clock.AdvanceTo(time.Hour)
	for _, p := range []Policy{
		{},
		{Prefix: PrefixNone, Placement: allocator.Contiguous, Control: OnDemand, Eviction: l1.EvictS3FIFO},
		{Prefix: PrefixBinarySearch, Placement: allocator.Scattered, Control: Periodic, Eviction: l1.EvictPrefix},
	} {
		m, err := NewManager[int](p, a, l1.Config{WriteTTL: time.Minute, ReadTTL: time.Second, Now: clock.Time})
		require.NoError(t, err)
		c := m.Config()
		_, wrapped := m.mem.(baseline.Counter)
		require.Equal(t, p.Prefix != PrefixOnePass, wrapped, "the baselines run as memory wrappers")
		require.Equal(t, p.Placement, c.Placement)
		require.Equal(t, p.Control == OnDemand, c.EvictOnDemand)
		require.Equal(t, p.Eviction, c.Eviction)
		require.Equal(t, time.Minute, c.WriteTTL)
		require.Equal(t, time.Second, c.ReadTTL)
		require.Equal(t, Epoch.Add(time.Hour), c.Now())
		require.NoError(t, m.Close())
	}
}

func TestPolicyNames(t *testing.T) {
	require.Equal(t, "periodic", Periodic.String())
	require.Equal(t, "on-demand", OnDemand.String())
	require.Equal(t, "Control(7)", Control(7).String())
	require.Equal(t, []string{"none", "binarysearch", "onepass"},
		[]string{PrefixNone.String(), PrefixBinarySearch.String(), PrefixOnePass.String()})
	require.Equal(t, "x/y", Policy{Name: "x/y"}.String())
}
