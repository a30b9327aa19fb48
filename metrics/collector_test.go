package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const mib = 1 << 20

// knownAllocator returns a 16 MiB allocator in a known state: 16 blocks of
// 1 MiB allocated, blocks 1, 3 and 5 freed (3 MiB free in three 1 MiB
// extents), one fragmented and one no-space failure, one partial grant.
func knownAllocator(t *testing.T) *allocator.Allocator {
	t.Helper()
	r, err := hostmem.NewHeapRegion(16 * mib)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	bs, err := a.AllocateBatch(mib, 16, allocator.Contiguous)
	require.NoError(t, err)
	got, err := a.AllocateUpTo(mib, 2, allocator.Scattered)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, a.Free(bs[1], bs[3], bs[5]))
	_, err = a.Allocate(2 * mib)
	require.ErrorIs(t, err, allocator.ErrOutOfMemory) // fragmented
	_, err = a.Allocate(4 * mib)
	require.ErrorIs(t, err, allocator.ErrOutOfMemory) // no space
	return a
}

const wantAllocator = `
# HELP kvalloc_allocator_blocks_allocated_total Blocks handed out.
# TYPE kvalloc_allocator_blocks_allocated_total counter
kvalloc_allocator_blocks_allocated_total{pool="p0"} 16
# HELP kvalloc_allocator_blocks_freed_total Blocks freed.
# TYPE kvalloc_allocator_blocks_freed_total counter
kvalloc_allocator_blocks_freed_total{pool="p0"} 3
# HELP kvalloc_allocator_capacity_bytes Bytes the allocator serves; over a segmented region, the ready part.
# TYPE kvalloc_allocator_capacity_bytes gauge
kvalloc_allocator_capacity_bytes{pool="p0"} 1.6777216e+07
# HELP kvalloc_allocator_failures_total Failed allocation calls by cause: no_space (fewer free bytes than asked) or fragmented (enough free bytes, no extents to hold them).
# TYPE kvalloc_allocator_failures_total counter
kvalloc_allocator_failures_total{cause="fragmented",pool="p0"} 1
kvalloc_allocator_failures_total{cause="no_space",pool="p0"} 1
# HELP kvalloc_allocator_fragmentation_ratio 1 - largest_free/free: the share of free bytes a single object cannot use; 0 when nothing is free.
# TYPE kvalloc_allocator_fragmentation_ratio gauge
kvalloc_allocator_fragmentation_ratio{pool="p0"} 0.6666666666666667
# HELP kvalloc_allocator_free_bytes Free bytes: capacity minus used.
# TYPE kvalloc_allocator_free_bytes gauge
kvalloc_allocator_free_bytes{pool="p0"} 3.145728e+06
# HELP kvalloc_allocator_free_extents Number of maximal free extents.
# TYPE kvalloc_allocator_free_extents gauge
kvalloc_allocator_free_extents{pool="p0"} 3
# HELP kvalloc_allocator_largest_free_bytes Bytes in the largest free extent: the biggest object that fits now.
# TYPE kvalloc_allocator_largest_free_bytes gauge
kvalloc_allocator_largest_free_bytes{pool="p0"} 1.048576e+06
# HELP kvalloc_allocator_live_blocks Number of live blocks.
# TYPE kvalloc_allocator_live_blocks gauge
kvalloc_allocator_live_blocks{pool="p0"} 13
# HELP kvalloc_allocator_partial_grants_total AllocateUpTo calls that granted fewer objects than asked.
# TYPE kvalloc_allocator_partial_grants_total counter
kvalloc_allocator_partial_grants_total{pool="p0"} 1
# HELP kvalloc_allocator_used_bytes Bytes in live blocks.
# TYPE kvalloc_allocator_used_bytes gauge
kvalloc_allocator_used_bytes{pool="p0"} 1.3631488e+07
`

// fakeRegion is a RegionSource with a fixed progress.
type fakeRegion hostmem.SegmentProgress

func (f fakeRegion) Progress() hostmem.SegmentProgress { return hostmem.SegmentProgress(f) }

const wantRegion = `
# HELP kvalloc_region_pinned_bytes Bytes locked (mlock) or registered with the GPU driver.
# TYPE kvalloc_region_pinned_bytes gauge
kvalloc_region_pinned_bytes{pool="p0"} 6.7108864e+08
# HELP kvalloc_region_prepare_done 1 once the region's workers have stopped (all ready, failed or closed), else 0.
# TYPE kvalloc_region_prepare_done gauge
kvalloc_region_prepare_done{pool="p0"} 1
# HELP kvalloc_region_prepare_seconds Seconds from the region's constructor to its last segment ready, or to now while the workers run.
# TYPE kvalloc_region_prepare_seconds gauge
kvalloc_region_prepare_seconds{pool="p0"} 1.5
# HELP kvalloc_region_ready_bytes Bytes in segments ready to serve.
# TYPE kvalloc_region_ready_bytes gauge
kvalloc_region_ready_bytes{pool="p0"} 6.7108864e+08
# HELP kvalloc_region_ready_ratio Ready bytes over the region's size.
# TYPE kvalloc_region_ready_ratio gauge
kvalloc_region_ready_ratio{pool="p0"} 0.15625
# HELP kvalloc_region_segments Segments by state: ready, failed, pending.
# TYPE kvalloc_region_segments gauge
kvalloc_region_segments{pool="p0",state="failed"} 1
kvalloc_region_segments{pool="p0",state="pending"} 53
kvalloc_region_segments{pool="p0",state="ready"} 10
# HELP kvalloc_region_size_bytes The segmented region's reserved size.
# TYPE kvalloc_region_size_bytes gauge
kvalloc_region_size_bytes{pool="p0"} 4.294967296e+09
`

// knownL1 is an l1.Stats with every figure distinct.
var knownL1 = l1.Stats{
	Objects: 10, WriteLocked: 3, TemporaryReadLocked: 2, Held: 40 * mib, Used: 41 * mib, Capacity: 64 * mib,
	Counters: l1.Counters{WriteReservations: 21, PartialGrants: 4, FailedReservations: 5, OOMKeys: 6,
		Evictions: 9, OnDemandEvictions: 7, Expired: 8, FreeErrors: 0},
}

const wantL1 = `
# HELP kvalloc_l1_evictions_total Objects evicted, by reason: on_demand (ReserveWrite) or evict_to (EvictTo).
# TYPE kvalloc_l1_evictions_total counter
kvalloc_l1_evictions_total{pool="p0",reason="evict_to"} 2
kvalloc_l1_evictions_total{pool="p0",reason="on_demand"} 7
# HELP kvalloc_l1_failed_reservations_total ReserveWrite calls that had keys to allocate and allocated none.
# TYPE kvalloc_l1_failed_reservations_total counter
kvalloc_l1_failed_reservations_total{pool="p0"} 5
# HELP kvalloc_l1_free_errors_total Frees the memory refused.
# TYPE kvalloc_l1_free_errors_total counter
kvalloc_l1_free_errors_total{pool="p0"} 0
# HELP kvalloc_l1_held_bytes Bytes in the objects' blocks.
# TYPE kvalloc_l1_held_bytes gauge
kvalloc_l1_held_bytes{pool="p0"} 4.194304e+07
# HELP kvalloc_l1_lock_expiries_total Objects reclaimed because a write lock, or a temporary object's read lock, lapsed.
# TYPE kvalloc_l1_lock_expiries_total counter
kvalloc_l1_lock_expiries_total{pool="p0"} 8
# HELP kvalloc_l1_lookups_total Key lookups by call and result (hit or miss).
# TYPE kvalloc_l1_lookups_total counter
kvalloc_l1_lookups_total{call="ReserveRead",pool="p0",result="hit"} 11
kvalloc_l1_lookups_total{call="ReserveRead",pool="p0",result="miss"} 12
# HELP kvalloc_l1_objects Objects held, by state.
# TYPE kvalloc_l1_objects gauge
kvalloc_l1_objects{pool="p0",state="other"} 5
kvalloc_l1_objects{pool="p0",state="temporary_read_locked"} 2
kvalloc_l1_objects{pool="p0",state="write_locked"} 3
# HELP kvalloc_l1_oom_keys_total Keys answered OutOfMemory.
# TYPE kvalloc_l1_oom_keys_total counter
kvalloc_l1_oom_keys_total{pool="p0"} 6
# HELP kvalloc_l1_partial_grants_total ReserveWrite calls that allocated some, but not all, of their keys.
# TYPE kvalloc_l1_partial_grants_total counter
kvalloc_l1_partial_grants_total{pool="p0"} 4
# HELP kvalloc_l1_write_reservations_total Keys ReserveWrite granted.
# TYPE kvalloc_l1_write_reservations_total counter
kvalloc_l1_write_reservations_total{pool="p0"} 21
`

func knownCollector(t *testing.T) *Collector {
	return New(Options{
		Allocator: knownAllocator(t),
		Region: fakeRegion{Segments: 64, Ready: 10, Failed: 1, TotalBytes: 4 << 30, ReadyBytes: 640 * mib,
			PinnedBytes: 640 * mib, Done: true, Elapsed: 1500 * time.Millisecond},
		L1: func() L1Stats {
			s := FromL1Stats(knownL1)
			// What the lead wires once l1 counts lookups.
			s.Lookups = []L1Lookups{{Call: "ReserveRead", Hits: 11, Misses: 12}}
			return s
		},
		ConstLabels: prometheus.Labels{"pool": "p0"},
	})
}

func TestCollectorKnownState(t *testing.T) {
	c := knownCollector(t)
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(wantAllocator+wantRegion+wantL1)))
	// Each part alone, by name.
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(wantRegion),
		"kvalloc_region_size_bytes", "kvalloc_region_ready_bytes", "kvalloc_region_pinned_bytes", "kvalloc_region_ready_ratio",
		"kvalloc_region_segments", "kvalloc_region_prepare_seconds", "kvalloc_region_prepare_done"))
	// Label sets: 2 causes, 3 segment states, 3 object states, 2 eviction
	// reasons, hit and miss of one call.
	assert.Equal(t, 2+3+3+2+2, testutil.CollectAndCount(c, "kvalloc_allocator_failures_total", "kvalloc_region_segments",
		"kvalloc_l1_objects", "kvalloc_l1_evictions_total", "kvalloc_l1_lookups_total"))
}

// TestCollectorCatchesChange is the check biting: one more block freed
// changes five figures, and the comparison says so.
func TestCollectorCatchesChange(t *testing.T) {
	a := knownAllocator(t)
	c := New(Options{Allocator: a, ConstLabels: prometheus.Labels{"pool": "p0"}})
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(wantAllocator)))
	require.NoError(t, a.Free(allocator.Block{Offset: 15 * mib, Size: mib, Gen: 16}))
	err := testutil.CollectAndCompare(c, strings.NewReader(wantAllocator))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `kvalloc_allocator_blocks_freed_total{pool="p0"} 4`)
}

func TestCollectorLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(knownCollector(t))
	require.NoError(t, err)
	assert.Empty(t, problems, "Prometheus naming rules")
}

func TestCollectorRegistersPedantically(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(knownCollector(t)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	assert.Len(t, mfs, 11+7+10)
	// A second pool in the same registry, told apart by its label.
	require.NoError(t, reg.Register(New(Options{Allocator: knownAllocator(t), ConstLabels: prometheus.Labels{"pool": "p1"}})))
	_, err = reg.Gather()
	require.NoError(t, err)
	// The same pool twice is refused by the registry, not silently doubled.
	require.Error(t, reg.Register(New(Options{Allocator: knownAllocator(t), ConstLabels: prometheus.Labels{"pool": "p1"}})))
}

func TestCollectorNoSources(t *testing.T) {
	c := New(Options{})
	assert.Zero(t, testutil.CollectAndCount(c))
	ch := make(chan *prometheus.Desc, 64)
	c.Describe(ch)
	assert.Zero(t, len(ch))
}

func TestFragmentation(t *testing.T) {
	for _, tc := range []struct {
		free, largest int64
		want          float64
	}{
		{0, 0, 0},
		{4096, 4096, 0},
		{4 * mib, mib, 0.75},
		{1 << 40, 4096, 1 - 4096.0/(1<<40)},
	} {
		assert.Equal(t, tc.want, Fragmentation(allocator.Stats{Free: tc.free, LargestFree: tc.largest}), "%+v", tc)
	}
}

// TestCollectorRealL1 wires a real manager: three keys written, one still
// write-locked, and checks the objects and reservations.
func TestCollectorRealL1(t *testing.T) {
	r, err := hostmem.NewHeapRegion(16 * mib)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer a.Close()
	m, err := l1.New[string](a, l1.Config{})
	require.NoError(t, err)
	defer m.Close()
	res, err := m.ReserveWrite([]string{"a", "b", "c"}, nil, mib, l1.ModeAll)
	require.NoError(t, err)
	_, err = m.FinishWrite([]string{"a", "b"}, []l1.Lease{res[0].Lease, res[1].Lease})
	require.NoError(t, err)
	c := New(Options{L1: L1(m)})
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP kvalloc_l1_objects Objects held, by state.
# TYPE kvalloc_l1_objects gauge
kvalloc_l1_objects{state="other"} 2
kvalloc_l1_objects{state="temporary_read_locked"} 0
kvalloc_l1_objects{state="write_locked"} 1
# HELP kvalloc_l1_write_reservations_total Keys ReserveWrite granted.
# TYPE kvalloc_l1_write_reservations_total counter
kvalloc_l1_write_reservations_total 3
# HELP kvalloc_l1_held_bytes Bytes in the objects' blocks.
# TYPE kvalloc_l1_held_bytes gauge
kvalloc_l1_held_bytes 3.145728e+06
`), "kvalloc_l1_objects", "kvalloc_l1_write_reservations_total", "kvalloc_l1_held_bytes"))
}
