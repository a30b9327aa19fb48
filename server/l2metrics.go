//go:build linux

package server

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// l2counts are the daemon's counts of its L2 read path, for /metrics:
// what lookups found in L1 and in L2, and what the prefetches loaded.
type l2counts struct {
	lookups, l1Hits, l2Hits, prefetched, loaded, failed atomic.Uint64
	// l2Slow and l2Late are the L2 hits lookups did not count because
	// they would not pay (the estimated rate below MinRate; past the
	// lookup's budget); probes the keys loaded to measure the rate again.
	l2Slow, l2Late, probes atomic.Uint64
	// sizeL1, sizeL2 and sizeRead are the keys of another size than the
	// reader expects (or, in L2, an empty value, which no L1 object can
	// be): where a lookup's L1 prefix or its L2 run stopped, and the
	// keys reserve_read_prefix_wait answered SIZE_MISMATCH.
	sizeL1, sizeL2, sizeRead atomic.Uint64
}

var (
	descLookups    = prometheus.NewDesc("kvallocd_lookups_total", "Lookup calls.", nil, nil)
	descLookupL1   = prometheus.NewDesc("kvallocd_lookup_l1_hits_total", "Keys lookups found readable in L1.", nil, nil)
	descLookupL2   = prometheus.NewDesc("kvallocd_lookup_l2_hits_total", "Keys lookups found in L2 past the L1 prefix: what the cluster adds.", nil, nil)
	descPrefetched = prometheus.NewDesc("kvallocd_l2_prefetch_keys_total", "Keys lookups began loading from L2 into L1.", nil, nil)
	descLoaded     = prometheus.NewDesc("kvallocd_l2_prefetch_loaded_total", "Prefetched keys loaded, checked and finished in L1.", nil, nil)
	descFailed     = prometheus.NewDesc("kvallocd_l2_prefetch_failed_total", "Prefetched keys aborted: a miss, a bad value, a timeout or a shutdown.", nil, nil)
	descUnpaid     = prometheus.NewDesc("kvallocd_lookup_l2_unpaid_total", "L2 hits lookups did not count because they would not pay: reason rate (the estimated load rate below -l2-min-rate) or budget (they would not load within the lookup's budget).", []string{"reason"}, nil)
	descProbes     = prometheus.NewDesc("kvallocd_l2_prefetch_probe_keys_total", "Keys loaded from L2, uncounted, to measure the load rate again while no L2 hit paid.", nil, nil)
	descRate       = prometheus.NewDesc("kvallocd_l2_load_rate_bytes_per_second", "The daemon's estimate of its L2 load rate: moving average of each prefetch get's payload bytes over its time.", nil, nil)
	descGetTime    = prometheus.NewDesc("kvallocd_l2_load_get_seconds", "Moving average of a prefetch get's time.", nil, nil)
	descSamples    = prometheus.NewDesc("kvallocd_l2_load_samples_total", "Prefetch gets measured for the load-rate estimate (0: cold, every hit counts).", nil, nil)
	descSizeMiss   = prometheus.NewDesc("kvallocd_size_mismatch_total", "Keys of another size than their reader expects, a miss: where a lookup's L1 prefix (where=\"l1\") or L2 run (\"l2\"; an empty L2 value too) stopped, and the keys reserve_read_prefix_wait answered SIZE_MISMATCH (\"read\").", []string{"where"}, nil)
)

// l2Collector is the daemon's L2 read-path metrics.
type l2Collector struct {
	c *l2counts
	s *Server
}

func (l l2Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLookups, descLookupL1, descLookupL2, descPrefetched, descLoaded, descFailed,
		descUnpaid, descProbes, descRate, descGetTime, descSamples, descSizeMiss} {
		ch <- d
	}
}

func (l l2Collector) Collect(ch chan<- prometheus.Metric) {
	k := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	k(descLookups, l.c.lookups.Load())
	k(descLookupL1, l.c.l1Hits.Load())
	k(descLookupL2, l.c.l2Hits.Load())
	k(descPrefetched, l.c.prefetched.Load())
	k(descLoaded, l.c.loaded.Load())
	k(descFailed, l.c.failed.Load())
	ch <- prometheus.MustNewConstMetric(descUnpaid, prometheus.CounterValue, float64(l.c.l2Slow.Load()), "rate")
	ch <- prometheus.MustNewConstMetric(descUnpaid, prometheus.CounterValue, float64(l.c.l2Late.Load()), "budget")
	k(descProbes, l.c.probes.Load())
	e := l.s.L2Estimate()
	ch <- prometheus.MustNewConstMetric(descRate, prometheus.GaugeValue, e.Rate)
	ch <- prometheus.MustNewConstMetric(descGetTime, prometheus.GaugeValue, e.Latency.Seconds())
	k(descSamples, e.Samples)
	for where, v := range map[string]uint64{"l1": l.c.sizeL1.Load(), "l2": l.c.sizeL2.Load(), "read": l.c.sizeRead.Load()} {
		ch <- prometheus.MustNewConstMetric(descSizeMiss, prometheus.CounterValue, float64(v), where)
	}
}

// LookupCounts are the daemon's lookup figures since it started.
type LookupCounts struct {
	// Lookups is the lookup calls; L1Hits and L2Hits the keys they found
	// in L1 and, past the L1 prefix, in L2.
	Lookups, L1Hits, L2Hits uint64
	// Prefetched is the keys they began loading from L2, Loaded those
	// loaded and finished, Failed those aborted.
	Prefetched, Loaded, Failed uint64
	// L2Slow and L2Late are the L2 hits they did not count because they
	// would not pay: the estimated load rate was below L2Config.MinRate,
	// or they would not have loaded within the lookup's budget. Probes
	// is the keys loaded, uncounted, to measure the rate again.
	L2Slow, L2Late, Probes uint64
	// SizeL1, SizeL2 and SizeRead are the keys found of another size than
	// their reader expected (PROTOCOL.md, "Expected sizes"), a miss each:
	// where a lookup's L1 prefix stopped, where its L2 run stopped (an
	// empty L2 value counts too, whatever the reader expects), and the
	// keys reserve_read_prefix_wait answered SIZE_MISMATCH.
	SizeL1, SizeL2, SizeRead uint64
}

// LookupCounts returns the daemon's lookup figures.
func (s *Server) LookupCounts() LookupCounts {
	c := &s.l2cnt
	return LookupCounts{Lookups: c.lookups.Load(), L1Hits: c.l1Hits.Load(), L2Hits: c.l2Hits.Load(),
		Prefetched: c.prefetched.Load(), Loaded: c.loaded.Load(), Failed: c.failed.Load(),
		L2Slow: c.l2Slow.Load(), L2Late: c.l2Late.Load(), Probes: c.probes.Load(),
		SizeL1: c.sizeL1.Load(), SizeL2: c.sizeL2.Load(), SizeRead: c.sizeRead.Load()}
}
