package metrics

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/prometheus/client_golang/prometheus"
)

// AllocatorSource is an allocator to expose: *allocator.Allocator.
type AllocatorSource interface {
	Stats() allocator.Stats
}

// RegionSource is a segmented region to expose:
// *hostmem.SegmentedRegion.
type RegionSource interface {
	Progress() hostmem.SegmentProgress
}

// L1Source returns an l1 manager's figures at scrape time; L1 builds one
// from a manager.
type L1Source func() L1Stats

// Options configures New. Every source is optional.
type Options struct {
	Allocator AllocatorSource
	Region    RegionSource
	L1        L1Source
	// ConstLabels are added to every metric, e.g. {"pool": "gpu0"} when one
	// registry holds collectors for several pools.
	ConstLabels prometheus.Labels
}

// Collector is a prometheus.Collector over the sources in Options. It is
// safe for concurrent scrapes.
type Collector struct {
	opts Options

	capacity, used, free, largest, fragmentation, extents, live *prometheus.Desc
	allocated, freed, failures, partial                         *prometheus.Desc

	regionSize, ready, pinned, readyRatio, segments, prepSeconds, prepDone *prometheus.Desc

	lookups, lookupCalls, lookupSkipped, evictions, expiries, objects, held *prometheus.Desc
	quarantined, quarantines                                                *prometheus.Desc
	reservations, l1Partial, l1Failed, oomKeys, freeErrs                    *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector over the sources in opts. Register it with
// prometheus.Registerer.Register; New registers nothing itself.
func New(opts Options) *Collector {
	c := &Collector{opts: opts}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("kvalloc_"+name, help, labels, opts.ConstLabels)
	}
	c.capacity = d("allocator_capacity_bytes", "Bytes the allocator serves; over a segmented region, the ready part.")
	c.used = d("allocator_used_bytes", "Bytes in live blocks.")
	c.free = d("allocator_free_bytes", "Free bytes: capacity minus used.")
	c.largest = d("allocator_largest_free_bytes", "Bytes in the largest free extent: the biggest object that fits now.")
	c.fragmentation = d("allocator_fragmentation_ratio", "1 - largest_free/free: the share of free bytes a single object cannot use; 0 when nothing is free.")
	c.extents = d("allocator_free_extents", "Number of maximal free extents.")
	c.live = d("allocator_live_blocks", "Number of live blocks.")
	c.allocated = d("allocator_blocks_allocated_total", "Blocks handed out.")
	c.freed = d("allocator_blocks_freed_total", "Blocks freed.")
	c.failures = d("allocator_failures_total", "Failed allocation calls by cause: no_space (fewer free bytes than asked) or fragmented (enough free bytes, no extents to hold them).", "cause")
	c.partial = d("allocator_partial_grants_total", "AllocateUpTo calls that granted fewer objects than asked.")

	c.regionSize = d("region_size_bytes", "The segmented region's reserved size.")
	c.ready = d("region_ready_bytes", "Bytes in segments ready to serve.")
	c.pinned = d("region_pinned_bytes", "Bytes locked (mlock) or registered with the GPU driver.")
	c.readyRatio = d("region_ready_ratio", "Ready bytes over the region's size.")
	c.segments = d("region_segments", "Segments by state: ready, failed, pending.", "state")
	c.prepSeconds = d("region_prepare_seconds", "Seconds from the region's constructor to its last segment ready, or to now while the workers run.")
	c.prepDone = d("region_prepare_done", "1 once the region's workers have stopped (all ready, failed or closed), else 0.")

	c.lookups = d("l1_lookups_total", "Keys looked up, by kind of call (read, read_prefix, unsafe_read, write) and result (hit or miss).", "kind", "result")
	c.lookupCalls = d("l1_lookup_calls_total", "Calls that looked keys up, by kind.", "kind")
	c.lookupSkipped = d("l1_lookup_skipped_keys_total", "Keys a prefix lookup did not look at, behind the key it stopped at, by kind (only read_prefix skips).", "kind")
	c.evictions = d("l1_evictions_total", "Objects evicted, by reason: on_demand (ReserveWrite) or evict_to (EvictTo).", "reason")
	c.expiries = d("l1_lock_expiries_total", "Objects reclaimed because a write lock, or a temporary object's read lock, lapsed.")
	c.objects = d("l1_objects", "Objects held, by state.", "state")
	c.held = d("l1_held_bytes", "Bytes in the objects' blocks.")
	c.quarantined = d("l1_quarantined_bytes", "Bytes in blocks held in no object: lapsed writes and keys deleted with force under a live lock, kept until their holders finish, abort, release or disconnect.")
	c.quarantines = d("l1_quarantines_total", "Lapsed writes whose blocks were quarantined.")
	c.reservations = d("l1_write_reservations_total", "Keys ReserveWrite granted.")
	c.l1Partial = d("l1_partial_grants_total", "ReserveWrite calls that allocated some, but not all, of their keys.")
	c.l1Failed = d("l1_failed_reservations_total", "ReserveWrite calls that had keys to allocate and allocated none.")
	c.oomKeys = d("l1_oom_keys_total", "Keys answered OutOfMemory.")
	c.freeErrs = d("l1_free_errors_total", "Frees the memory refused.")
	return c
}

func (c *Collector) allocatorDescs() []*prometheus.Desc {
	return []*prometheus.Desc{c.capacity, c.used, c.free, c.largest, c.fragmentation, c.extents, c.live,
		c.allocated, c.freed, c.failures, c.partial}
}

func (c *Collector) regionDescs() []*prometheus.Desc {
	return []*prometheus.Desc{c.regionSize, c.ready, c.pinned, c.readyRatio, c.segments, c.prepSeconds, c.prepDone}
}

func (c *Collector) l1Descs() []*prometheus.Desc {
	return []*prometheus.Desc{c.lookups, c.lookupCalls, c.lookupSkipped, c.evictions, c.expiries, c.objects, c.held,
		c.quarantined, c.quarantines, c.reservations, c.l1Partial, c.l1Failed, c.oomKeys, c.freeErrs}
}

// Describe sends the descriptions of the metrics of every source present.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	var ds []*prometheus.Desc
	if c.opts.Allocator != nil {
		ds = append(ds, c.allocatorDescs()...)
	}
	if c.opts.Region != nil {
		ds = append(ds, c.regionDescs()...)
	}
	if c.opts.L1 != nil {
		ds = append(ds, c.l1Descs()...)
	}
	for _, d := range ds {
		ch <- d
	}
}

// Collect reads every source once and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.opts.Allocator != nil {
		c.collectAllocator(ch, c.opts.Allocator.Stats())
	}
	if c.opts.Region != nil {
		c.collectRegion(ch, c.opts.Region.Progress())
	}
	if c.opts.L1 != nil {
		c.collectL1(ch, c.opts.L1())
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func (c *Collector) collectAllocator(ch chan<- prometheus.Metric, s allocator.Stats) {
	gauge(ch, c.capacity, float64(s.Capacity))
	gauge(ch, c.used, float64(s.Used))
	gauge(ch, c.free, float64(s.Free))
	gauge(ch, c.largest, float64(s.LargestFree))
	gauge(ch, c.fragmentation, s.Fragmentation())
	gauge(ch, c.extents, float64(s.FreeExtents))
	gauge(ch, c.live, float64(s.LiveBlocks))
	counter(ch, c.allocated, s.Allocs)
	counter(ch, c.freed, s.Frees)
	counter(ch, c.failures, s.FailedNoSpace, "no_space")
	counter(ch, c.failures, s.FailedFragmented, "fragmented")
	counter(ch, c.partial, s.PartialGrants)
}

func (c *Collector) collectRegion(ch chan<- prometheus.Metric, p hostmem.SegmentProgress) {
	gauge(ch, c.regionSize, float64(p.TotalBytes))
	gauge(ch, c.ready, float64(p.ReadyBytes))
	gauge(ch, c.pinned, float64(p.PinnedBytes))
	ratio := 0.0
	if p.TotalBytes > 0 {
		ratio = float64(p.ReadyBytes) / float64(p.TotalBytes)
	}
	gauge(ch, c.readyRatio, ratio)
	gauge(ch, c.segments, float64(p.Ready), "ready")
	gauge(ch, c.segments, float64(p.Failed), "failed")
	gauge(ch, c.segments, float64(p.Segments-p.Ready-p.Failed), "pending")
	gauge(ch, c.prepSeconds, p.Elapsed.Seconds())
	done := 0.0
	if p.Done {
		done = 1
	}
	gauge(ch, c.prepDone, done)
}

func (c *Collector) collectL1(ch chan<- prometheus.Metric, s L1Stats) {
	for _, l := range s.Lookups {
		counter(ch, c.lookups, l.Hits, l.Kind, "hit")
		counter(ch, c.lookups, l.Misses, l.Kind, "miss")
		counter(ch, c.lookupCalls, l.Calls, l.Kind)
		counter(ch, c.lookupSkipped, l.Skipped, l.Kind)
	}
	for _, e := range s.Evictions {
		counter(ch, c.evictions, e.Count, e.Reason)
	}
	counter(ch, c.expiries, s.LockExpiries)
	for _, o := range s.Objects {
		gauge(ch, c.objects, float64(o.Count), o.State)
	}
	gauge(ch, c.held, float64(s.HeldBytes))
	gauge(ch, c.quarantined, float64(s.QuarantinedBytes))
	counter(ch, c.quarantines, s.Quarantines)
	counter(ch, c.reservations, s.WriteReservations)
	counter(ch, c.l1Partial, s.PartialGrants)
	counter(ch, c.l1Failed, s.FailedReservations)
	counter(ch, c.oomKeys, s.OOMKeys)
	counter(ch, c.freeErrs, s.FreeErrors)
}
