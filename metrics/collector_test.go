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
	Objects: 10, WriteLocked: 3, TemporaryReadLocked: 2, Held: 40 * mib, Used: 43 * mib, Capacity: 64 * mib,
	QuarantinedObjects: 1, QuarantinedBytes: 3 * mib,
	Counters: l1.Counters{WriteReservations: 21, PartialGrants: 4, FailedReservations: 5, OOMKeys: 6,
		Evictions: 9, OnDemandEvictions: 7, Expired: 8, Quarantines: 13, FreeErrors: 0,
		Lookups: [l1.NumLookupKinds]l1.LookupCounts{
			l1.LookupRead:       {Calls: 30, Hits: 11, Misses: 12},
			l1.LookupReadPrefix: {Calls: 31, Hits: 14, Misses: 15, Skipped: 16},
			l1.LookupUnsafeRead: {Calls: 32, Hits: 17, Misses: 18},
			l1.LookupWrite:      {Calls: 33, Hits: 19, Misses: 20},
		}},
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
# HELP kvalloc_l1_lookup_calls_total Calls that looked keys up, by kind.
# TYPE kvalloc_l1_lookup_calls_total counter
kvalloc_l1_lookup_calls_total{kind="read",pool="p0"} 30
kvalloc_l1_lookup_calls_total{kind="read_prefix",pool="p0"} 31
kvalloc_l1_lookup_calls_total{kind="unsafe_read",pool="p0"} 32
kvalloc_l1_lookup_calls_total{kind="write",pool="p0"} 33
# HELP kvalloc_l1_lookup_skipped_keys_total Keys a prefix lookup did not look at, behind the key it stopped at, by kind (only read_prefix skips).
# TYPE kvalloc_l1_lookup_skipped_keys_total counter
kvalloc_l1_lookup_skipped_keys_total{kind="read",pool="p0"} 0
kvalloc_l1_lookup_skipped_keys_total{kind="read_prefix",pool="p0"} 16
kvalloc_l1_lookup_skipped_keys_total{kind="unsafe_read",pool="p0"} 0
kvalloc_l1_lookup_skipped_keys_total{kind="write",pool="p0"} 0
# HELP kvalloc_l1_lookups_total Keys looked up, by kind of call (read, read_prefix, unsafe_read, write) and result (hit or miss).
# TYPE kvalloc_l1_lookups_total counter
kvalloc_l1_lookups_total{kind="read",pool="p0",result="hit"} 11
kvalloc_l1_lookups_total{kind="read",pool="p0",result="miss"} 12
kvalloc_l1_lookups_total{kind="read_prefix",pool="p0",result="hit"} 14
kvalloc_l1_lookups_total{kind="read_prefix",pool="p0",result="miss"} 15
kvalloc_l1_lookups_total{kind="unsafe_read",pool="p0",result="hit"} 17
kvalloc_l1_lookups_total{kind="unsafe_read",pool="p0",result="miss"} 18
kvalloc_l1_lookups_total{kind="write",pool="p0",result="hit"} 19
kvalloc_l1_lookups_total{kind="write",pool="p0",result="miss"} 20
# HELP kvalloc_l1_objects Objects held, by state.
# TYPE kvalloc_l1_objects gauge
kvalloc_l1_objects{pool="p0",state="other"} 5
kvalloc_l1_objects{pool="p0",state="quarantined"} 1
kvalloc_l1_objects{pool="p0",state="temporary_read_locked"} 2
kvalloc_l1_objects{pool="p0",state="write_locked"} 3
# HELP kvalloc_l1_oom_keys_total Keys answered OutOfMemory.
# TYPE kvalloc_l1_oom_keys_total counter
kvalloc_l1_oom_keys_total{pool="p0"} 6
# HELP kvalloc_l1_quarantined_bytes Bytes in blocks held in no object: lapsed writes and keys deleted with force under a live lock, kept until their holders finish, abort, release or disconnect.
# TYPE kvalloc_l1_quarantined_bytes gauge
kvalloc_l1_quarantined_bytes{pool="p0"} 3.145728e+06
# HELP kvalloc_l1_quarantines_total Lapsed writes whose blocks were quarantined.
# TYPE kvalloc_l1_quarantines_total counter
kvalloc_l1_quarantines_total{pool="p0"} 13
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
		L1:          func() L1Stats { return FromL1Stats(knownL1) },
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
	// Label sets: 2 causes, 3 segment states, 4 object states, 2 eviction
	// reasons, hit and miss of 4 kinds of lookup.
	assert.Equal(t, 2+3+4+2+2*4, testutil.CollectAndCount(c, "kvalloc_allocator_failures_total", "kvalloc_region_segments",
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
	assert.Len(t, mfs, 11+7+14)
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

// TestCollectorRealL1 wires a real manager that quarantines lapsed
// writes: four keys written, two finished, two lapsed while being written;
// a read and a prefix lookup. The objects, lookups, held and quarantined
// bytes are the manager's, and the allocator's used bytes are held plus
// quarantined.
func TestCollectorRealL1(t *testing.T) {
	r, err := hostmem.NewHeapRegion(16 * mib)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer a.Close()
	now := time.Unix(1e9, 0)
	m, err := l1.New[string](a, l1.Config{QuarantineLapsedWrites: true, WriteTTL: time.Minute, Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer m.Close()
	res, err := m.ReserveWrite([]string{"a", "b", "c", "d"}, nil, mib, l1.ModeAll)
	require.NoError(t, err)
	_, err = m.FinishWrite([]string{"a", "b"}, []l1.Lease{res[0].Lease, res[1].Lease})
	require.NoError(t, err)
	now = now.Add(time.Minute) // c and d lapse while their writer lives
	_, err = m.ReserveRead([]string{"a", "c", "x"}, 1)
	require.NoError(t, err)
	_, n, err := m.ReserveReadPrefix([]string{"a", "b", "c", "a"}, 1)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	c := New(Options{L1: L1(m), Allocator: a})
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP kvalloc_l1_objects Objects held, by state.
# TYPE kvalloc_l1_objects gauge
kvalloc_l1_objects{state="other"} 2
kvalloc_l1_objects{state="quarantined"} 2
kvalloc_l1_objects{state="temporary_read_locked"} 0
kvalloc_l1_objects{state="write_locked"} 0
# HELP kvalloc_l1_write_reservations_total Keys ReserveWrite granted.
# TYPE kvalloc_l1_write_reservations_total counter
kvalloc_l1_write_reservations_total 4
# HELP kvalloc_l1_held_bytes Bytes in the objects' blocks.
# TYPE kvalloc_l1_held_bytes gauge
kvalloc_l1_held_bytes 2.097152e+06
# HELP kvalloc_l1_quarantined_bytes Bytes in blocks held in no object: lapsed writes and keys deleted with force under a live lock, kept until their holders finish, abort, release or disconnect.
# TYPE kvalloc_l1_quarantined_bytes gauge
kvalloc_l1_quarantined_bytes 2.097152e+06
# HELP kvalloc_allocator_used_bytes Bytes in live blocks.
# TYPE kvalloc_allocator_used_bytes gauge
kvalloc_allocator_used_bytes 4.194304e+06
# HELP kvalloc_l1_lookups_total Keys looked up, by kind of call (read, read_prefix, unsafe_read, write) and result (hit or miss).
# TYPE kvalloc_l1_lookups_total counter
kvalloc_l1_lookups_total{kind="read",result="hit"} 1
kvalloc_l1_lookups_total{kind="read",result="miss"} 2
kvalloc_l1_lookups_total{kind="read_prefix",result="hit"} 2
kvalloc_l1_lookups_total{kind="read_prefix",result="miss"} 1
kvalloc_l1_lookups_total{kind="unsafe_read",result="hit"} 0
kvalloc_l1_lookups_total{kind="unsafe_read",result="miss"} 0
kvalloc_l1_lookups_total{kind="write",result="hit"} 0
kvalloc_l1_lookups_total{kind="write",result="miss"} 4
# HELP kvalloc_l1_lookup_skipped_keys_total Keys a prefix lookup did not look at, behind the key it stopped at, by kind (only read_prefix skips).
# TYPE kvalloc_l1_lookup_skipped_keys_total counter
kvalloc_l1_lookup_skipped_keys_total{kind="read"} 0
kvalloc_l1_lookup_skipped_keys_total{kind="read_prefix"} 1
kvalloc_l1_lookup_skipped_keys_total{kind="unsafe_read"} 0
kvalloc_l1_lookup_skipped_keys_total{kind="write"} 0
`), "kvalloc_l1_objects", "kvalloc_l1_write_reservations_total", "kvalloc_l1_held_bytes", "kvalloc_l1_quarantined_bytes",
		"kvalloc_allocator_used_bytes", "kvalloc_l1_lookups_total", "kvalloc_l1_lookup_skipped_keys_total"))
}

// TestCollectorL1HeldBytesShared: kvalloc_l1_held_bytes is the bytes in
// the manager's own objects, not the allocator's used bytes, when another
// user shares the allocator: the manager holds 3 MiB, the other user
// 5 MiB, and kvalloc_allocator_used_bytes says 8 MiB.
func TestCollectorL1HeldBytesShared(t *testing.T) {
	r, err := hostmem.NewHeapRegion(16 * mib)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	defer a.Close()
	m, err := l1.New[string](a, l1.Config{})
	require.NoError(t, err)
	defer m.Close()
	ks := []string{"a", "b", "c"}
	res, err := m.ReserveWrite(ks, nil, mib, l1.ModeAll)
	require.NoError(t, err)
	_, err = m.FinishWrite(ks, []l1.Lease{res[0].Lease, res[1].Lease, res[2].Lease})
	require.NoError(t, err)
	other, err := a.AllocateBatch(mib, 5, allocator.Scattered)
	require.NoError(t, err)
	defer a.Free(other...)
	c := New(Options{Allocator: a, L1: L1(m)})
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP kvalloc_allocator_used_bytes Bytes in live blocks.
# TYPE kvalloc_allocator_used_bytes gauge
kvalloc_allocator_used_bytes 8.388608e+06
# HELP kvalloc_l1_held_bytes Bytes in the objects' blocks.
# TYPE kvalloc_l1_held_bytes gauge
kvalloc_l1_held_bytes 3.145728e+06
`), "kvalloc_allocator_used_bytes", "kvalloc_l1_held_bytes"))
}
