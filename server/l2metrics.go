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
}

var (
	descLookups    = prometheus.NewDesc("kvallocd_lookups_total", "Lookup calls.", nil, nil)
	descLookupL1   = prometheus.NewDesc("kvallocd_lookup_l1_hits_total", "Keys lookups found readable in L1.", nil, nil)
	descLookupL2   = prometheus.NewDesc("kvallocd_lookup_l2_hits_total", "Keys lookups found in L2 past the L1 prefix: what the cluster adds.", nil, nil)
	descPrefetched = prometheus.NewDesc("kvallocd_l2_prefetch_keys_total", "Keys lookups began loading from L2 into L1.", nil, nil)
	descLoaded     = prometheus.NewDesc("kvallocd_l2_prefetch_loaded_total", "Prefetched keys loaded, checked and finished in L1.", nil, nil)
	descFailed     = prometheus.NewDesc("kvallocd_l2_prefetch_failed_total", "Prefetched keys aborted: a miss, a bad value, a timeout or a shutdown.", nil, nil)
)

// l2Collector is the daemon's L2 read-path metrics.
type l2Collector struct{ c *l2counts }

func (l l2Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLookups, descLookupL1, descLookupL2, descPrefetched, descLoaded, descFailed} {
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
}

// LookupCounts are the daemon's lookup figures since it started.
type LookupCounts struct {
	// Lookups is the lookup calls; L1Hits and L2Hits the keys they found
	// in L1 and, past the L1 prefix, in L2.
	Lookups, L1Hits, L2Hits uint64
	// Prefetched is the keys they began loading from L2, Loaded those
	// loaded and finished, Failed those aborted.
	Prefetched, Loaded, Failed uint64
}

// LookupCounts returns the daemon's lookup figures.
func (s *Server) LookupCounts() LookupCounts {
	c := &s.l2cnt
	return LookupCounts{Lookups: c.lookups.Load(), L1Hits: c.l1Hits.Load(), L2Hits: c.l2Hits.Load(),
		Prefetched: c.prefetched.Load(), Loaded: c.loaded.Load(), Failed: c.failed.Load()}
}
