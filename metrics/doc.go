// Package metrics exposes kvalloc's allocator, segmented region and l1
// manager to Prometheus as one prometheus.Collector.
//
// # Contract
//
//   - Nothing is global. New returns a Collector over the sources it is
//     given; the caller registers it with a registry of its choosing, once
//     per pool, telling pools apart with Options.ConstLabels.
//   - Every scrape reads each source once (allocator.Stats is O(1); a
//     segmented region's Progress is a few atomic loads; the l1 source is
//     whatever function the caller gives, normally Manager.Stats, O(1)) and
//     reports the figures of that moment. Sources may be nil: their metrics
//     are then neither described nor collected.
//   - Names follow the Prometheus conventions: the kvalloc_ namespace, base
//     units (bytes, seconds), _total for counters, ratios from 0 to 1.
//
// # Metrics
//
// Allocator (AllocatorSource, e.g. *allocator.Allocator):
//
//	kvalloc_allocator_capacity_bytes        gauge    bytes the allocator serves (over a segmented region: the ready part)
//	kvalloc_allocator_used_bytes            gauge    bytes in live blocks
//	kvalloc_allocator_free_bytes            gauge    capacity - used
//	kvalloc_allocator_largest_free_bytes    gauge    the largest free extent: the biggest object that fits now
//	kvalloc_allocator_fragmentation_ratio   gauge    1 - largest_free/free; 0 when nothing is free
//	kvalloc_allocator_free_extents          gauge    number of maximal free extents
//	kvalloc_allocator_live_blocks           gauge    number of live blocks
//	kvalloc_allocator_blocks_allocated_total counter blocks handed out
//	kvalloc_allocator_blocks_freed_total    counter  blocks freed
//	kvalloc_allocator_failures_total{cause} counter  failed calls: cause="no_space" (fewer free bytes than asked) or "fragmented" (enough bytes, no extent or set of extents to hold them)
//	kvalloc_allocator_partial_grants_total  counter  AllocateUpTo calls that granted fewer objects than asked
//
// Fragmentation is 1 - largest_free/free: 0 when the free bytes are one
// extent (any request that fits in the free bytes as one object fits), near
// 1 when they are scattered in many small extents. It says how much of the
// free memory a single large object cannot use.
//
// Segmented region (RegionSource, e.g. *hostmem.SegmentedRegion):
//
//	kvalloc_region_size_bytes               gauge    the region's reserved size
//	kvalloc_region_ready_bytes              gauge    bytes in segments ready to serve
//	kvalloc_region_pinned_bytes             gauge    bytes locked or registered with the GPU driver
//	kvalloc_region_ready_ratio              gauge    ready/size
//	kvalloc_region_segments{state}          gauge    segments by state: "ready", "failed", "pending"
//	kvalloc_region_prepare_seconds          gauge    time from the constructor to the last segment ready (so far, while it runs)
//	kvalloc_region_prepare_done             gauge    1 once the workers have stopped, else 0
//
// l1 manager (L1Source, e.g. L1(manager)):
//
//	kvalloc_l1_lookups_total{kind,result}   counter  keys looked up, by kind of call and result="hit"|"miss" (see below)
//	kvalloc_l1_lookup_calls_total{kind}     counter  calls that looked keys up, by kind
//	kvalloc_l1_lookup_skipped_keys_total{kind} counter keys behind a prefix lookup's first miss, not looked at (kind="read_prefix"; 0 for the others)
//	kvalloc_l1_evictions_total{reason}      counter  objects evicted: reason="on_demand" (by ReserveWrite) or "evict_to" (by EvictTo)
//	kvalloc_l1_lock_expiries_total          counter  objects reclaimed because a write lock or a temporary object's read lock lapsed
//	kvalloc_l1_objects{state}               gauge    objects by state
//	kvalloc_l1_held_bytes                   gauge    bytes in the objects' blocks
//	kvalloc_l1_quarantined_bytes            gauge    bytes of blocks kept from other writers until their holders let go: lapsed writes', force-deleted locked objects'
//	kvalloc_l1_quarantines_total            counter  lapsed writes quarantined
//	kvalloc_l1_write_reservations_total     counter  keys ReserveWrite granted
//	kvalloc_l1_partial_grants_total         counter  ReserveWrite calls that allocated some but not all keys
//	kvalloc_l1_failed_reservations_total    counter  ReserveWrite calls that allocated none of their keys
//	kvalloc_l1_oom_keys_total               counter  keys answered OutOfMemory
//	kvalloc_l1_free_errors_total            counter  frees the memory refused
//
// The kinds of lookup are l1.LookupKind's: kind="read" (ReserveRead: a hit
// is a key read-locked, a miss one missing or being written),
// "read_prefix" (ReserveReadPrefix and AppendReadPrefix: the hits are the
// prefix, the miss the key the call stopped at, and the keys behind it are
// skipped, so hit/(hit+miss+skipped) is the share of the requested blocks
// found and hit/calls the mean prefix), "unsafe_read" (UnsafeRead: a hit
// is a read-locked key) and "write" (ReserveWrite: a hit is a key already
// present, which a store need not have sent). The object states are
// write_locked, temporary_read_locked, other and quarantined (lapsed
// writes and blocks of keys deleted with force under a live lock, which
// l1 does not count among its objects); over a memory only
// the manager uses, kvalloc_allocator_used_bytes = kvalloc_l1_held_bytes
// + kvalloc_l1_quarantined_bytes.
//
// FromL1Stats fills L1Stats from l1.Stats; see its documentation.
package metrics
