package l2

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats are a Tier's counters since it was made.
type Stats struct {
	// Hits and Misses count Get's keys: a checked payload returned, or
	// not (absent, corrupt, failed or skipped).
	Hits, Misses uint64
	// HeadHits and HeadMisses count Head's keys the same way.
	HeadHits, HeadMisses uint64
	// Puts counts values stored; PutFailures values a failed or timed out
	// call did not store; Drops values the daemon's bounded queue
	// dropped (Tier.Drop) before any call.
	Puts, PutFailures, Drops uint64
	// BytesIn and BytesOut are value bytes read from and written to the
	// store.
	BytesIn, BytesOut uint64
	// Corrupt counts values that failed a check (Decode, DecodeHeader):
	// each a miss, and deleted.
	Corrupt uint64
	// Partial counts objects stored in pieces that missed with some of
	// their pieces there: a piece absent or unreachable while others
	// read, of another layout or size, or of another put.
	Partial uint64
	// Forged counts values whose checksums were right and whose MAC was
	// not (ErrForged), and pieces whose payload its MAC refused (under a
	// MAC a piece's payload has no checksum: damaged or forged, it is
	// counted here): each a miss, and deleted.
	Forged uint64
	// Foreign counts values of another format version or MAC secret
	// (ErrForeign): each a miss, left in the store.
	Foreign uint64
	// AuthFailures counts store calls refused for the node's credentials
	// (a Redis NOAUTH, WRONGPASS or NOPERM).
	AuthFailures uint64
	// Errors counts store calls (one per server a batch touches) that
	// failed or timed out, Timeouts those of them that ran out their
	// whole timeout; Cut counts calls the caller's own deadline or
	// cancellation cut short (a lookup's budget), no verdict on the
	// store; Skipped calls an open breaker refused.
	Errors, Timeouts, Cut, Skipped uint64
	// Breaker is the worst state of the breakers of the servers that
	// still hold names (Open, then HalfOpen, else Closed); BreakerOpens
	// how often any breaker opened; Servers each server's breaker, by
	// id.
	Breaker      BreakerState
	BreakerOpens uint64
	Servers      []ServerBreaker
}

// counters are a Tier's Stats, kept as atomics.
type counters struct {
	hits, misses, headHits, headMisses  atomic.Uint64
	puts, putFailures, drops            atomic.Uint64
	bytesIn, bytesOut, corrupt          atomic.Uint64
	partial, forged, foreign            atomic.Uint64
	errors, timeouts, cut, skipped      atomic.Uint64
	getLatency, putLatency, headLatency prometheus.Histogram
}

func newCounters() *counters {
	h := func(name, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)})
	}
	return &counters{
		getLatency:  h("kvallocd_l2_get_seconds", "Time of one batched L2 get, to the store and back."),
		putLatency:  h("kvallocd_l2_put_seconds", "Time of one batched L2 put, to the store and back."),
		headLatency: h("kvallocd_l2_head_seconds", "Time of one batched L2 header read (a lookup's)."),
	}
}

func since(h prometheus.Histogram, t time.Time) { h.Observe(time.Since(t).Seconds()) }

var (
	descHits     = prometheus.NewDesc("kvallocd_l2_hits_total", "L2 get keys answered with a checked payload.", nil, nil)
	descMisses   = prometheus.NewDesc("kvallocd_l2_misses_total", "L2 get keys not answered: absent, corrupt, failed or skipped.", nil, nil)
	descHeadHit  = prometheus.NewDesc("kvallocd_l2_lookup_hits_total", "L2 header reads (lookups) that found a valid value.", nil, nil)
	descHeadMiss = prometheus.NewDesc("kvallocd_l2_lookup_misses_total", "L2 header reads (lookups) that found none.", nil, nil)
	descPuts     = prometheus.NewDesc("kvallocd_l2_puts_total", "Values stored in L2.", nil, nil)
	descPutFail  = prometheus.NewDesc("kvallocd_l2_put_failures_total", "Values a failed or timed-out L2 put did not store.", nil, nil)
	descDrops    = prometheus.NewDesc("kvallocd_l2_drops_total", "Puts dropped before any call: the queue was full, or the breaker open.", nil, nil)
	descBytesIn  = prometheus.NewDesc("kvallocd_l2_read_bytes_total", "Value bytes read from L2.", nil, nil)
	descBytesOut = prometheus.NewDesc("kvallocd_l2_written_bytes_total", "Value bytes written to L2.", nil, nil)
	descCorrupt  = prometheus.NewDesc("kvallocd_l2_checksum_failures_total", "L2 values that failed a check (magic, version, key, size, checksum): misses, deleted.", nil, nil)
	descPartial  = prometheus.NewDesc("kvallocd_l2_partial_misses_total", "L2 objects in pieces that missed with some of their pieces there (absent, unreachable, another layout or put).", nil, nil)
	descForged   = prometheus.NewDesc("kvallocd_l2_mac_failures_total", "L2 values whose checksums were right and whose MAC was not (written without the secret), and pieces whose payload failed its MAC (damaged or forged: under a MAC a piece payload has no checksum): misses, deleted.", nil, nil)
	descForeign  = prometheus.NewDesc("kvallocd_l2_foreign_values_total", "L2 values of another format version or MAC secret: misses, left in the store.", nil, nil)
	descAuth     = prometheus.NewDesc("kvallocd_l2_auth_failures_total", "L2 store calls refused for the daemon's credentials (Redis NOAUTH, WRONGPASS, NOPERM).", nil, nil)
	descErrors   = prometheus.NewDesc("kvallocd_l2_errors_total", "L2 calls that failed or timed out.", nil, nil)
	descSkipped  = prometheus.NewDesc("kvallocd_l2_skipped_total", "L2 calls the open breaker refused.", nil, nil)
	descBreaker  = prometheus.NewDesc("kvallocd_l2_breaker_state", "The L2 circuit breaker: 0 closed, 1 open, 2 half-open.", nil, nil)
	descOpens    = prometheus.NewDesc("kvallocd_l2_breaker_opens_total", "Times the L2 circuit breaker opened.", nil, nil)
	descTimeouts = prometheus.NewDesc("kvallocd_l2_timeouts_total", "L2 calls that ran out their whole timeout (each opens its server's breaker).", nil, nil)
	descCut      = prometheus.NewDesc("kvallocd_l2_cut_total", "L2 calls the caller's own deadline cut short (a lookup's budget): no verdict on the store.", nil, nil)
	descSrvState = prometheus.NewDesc("kvallocd_l2_server_breaker_state", "Each L2 server's circuit breaker (a Redis Cluster's masters, by address): 0 closed, 1 open, 2 half-open.", []string{"server"}, nil)
	descSrvOpens = prometheus.NewDesc("kvallocd_l2_server_breaker_opens_total", "Times each L2 server's circuit breaker opened.", []string{"server"}, nil)
)

// Describe implements prometheus.Collector: the tier's metrics,
// kvallocd_l2_*.
func (t *Tier) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHits, descMisses, descHeadHit, descHeadMiss, descPuts, descPutFail,
		descDrops, descBytesIn, descBytesOut, descCorrupt, descPartial, descForged, descForeign, descAuth, descErrors, descSkipped, descBreaker, descOpens,
		descTimeouts, descCut, descSrvState, descSrvOpens} {
		ch <- d
	}
	t.c.getLatency.Describe(ch)
	t.c.putLatency.Describe(ch)
	t.c.headLatency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (t *Tier) Collect(ch chan<- prometheus.Metric) {
	s := t.Stats()
	k := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	k(descHits, s.Hits)
	k(descMisses, s.Misses)
	k(descHeadHit, s.HeadHits)
	k(descHeadMiss, s.HeadMisses)
	k(descPuts, s.Puts)
	k(descPutFail, s.PutFailures)
	k(descDrops, s.Drops)
	k(descBytesIn, s.BytesIn)
	k(descBytesOut, s.BytesOut)
	k(descCorrupt, s.Corrupt)
	k(descPartial, s.Partial)
	k(descForged, s.Forged)
	k(descForeign, s.Foreign)
	k(descAuth, s.AuthFailures)
	k(descErrors, s.Errors)
	k(descSkipped, s.Skipped)
	ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, float64(s.Breaker))
	k(descOpens, s.BreakerOpens)
	k(descTimeouts, s.Timeouts)
	k(descCut, s.Cut)
	for _, sb := range s.Servers {
		ch <- prometheus.MustNewConstMetric(descSrvState, prometheus.GaugeValue, float64(sb.State), sb.ID)
		ch <- prometheus.MustNewConstMetric(descSrvOpens, prometheus.CounterValue, float64(sb.Opens), sb.ID)
	}
	t.c.getLatency.Collect(ch)
	t.c.putLatency.Collect(ch)
	t.c.headLatency.Collect(ch)
}
