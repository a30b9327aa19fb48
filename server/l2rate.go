//go:build linux

package server

import (
	"sync"
	"time"
)

// DefaultL2MinRate is kvallocd's -l2-min-rate, in bytes per second: the
// break-even of an L2 hit for Kimi K2 (70,272 KV bytes per token) at
// 10,000 prefill tokens per second (bench/cluster/DESIGN.md, "Does an L2
// hit beat recomputing?"). Below it, loading a block takes longer than
// recomputing it. L2Config's zero MinRate counts every hit.
const DefaultL2MinRate = 70_272 * 10_000

// DefaultL2ProbeInterval is L2Config.ProbeInterval's default.
const DefaultL2ProbeInterval = time.Second

// l2RateWeight is the weight of a new get in the load-rate estimate's
// moving averages.
const l2RateWeight = 0.25

// L2Estimate is the daemon's live estimate of how fast it loads from L2,
// from the prefetch gets it has made.
type L2Estimate struct {
	// Rate is a moving average (each get weighs a quarter) of each get's
	// payload bytes received ÷ its time, the effective rate a prefetch
	// loads at, round trips included: bytes per second.
	Rate float64
	// Latency is the moving average of a get's time.
	Latency time.Duration
	// Samples is the number of gets measured; 0 is a cold estimate.
	Samples uint64
}

// loadRate is the estimate and the time of its last sample or probe.
type loadRate struct {
	mu   sync.Mutex
	e    L2Estimate
	last time.Time
}

// observe adds one get: bytes of payload received in el. A get that
// received nothing (every key missed, timed out or was refused by the
// breaker) is a rate of 0. A time below a microsecond counts as one.
func (r *loadRate) observe(bytes int64, el time.Duration, now time.Time) {
	el = max(el, time.Microsecond)
	rate := float64(bytes) / el.Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.e.Samples == 0 {
		r.e.Rate, r.e.Latency = rate, el
	} else {
		r.e.Rate += l2RateWeight * (rate - r.e.Rate)
		r.e.Latency += time.Duration(l2RateWeight * float64(el-r.e.Latency))
	}
	r.e.Samples++
	r.last = now
}

func (r *loadRate) estimate() L2Estimate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.e
}

// probeDue reports whether a probe may start now (the last sample or
// probe is at least every ago), and if so marks one as started.
func (r *loadRate) probeDue(now time.Time, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.last) < every {
		return false
	}
	r.last = now
	return true
}

// l2Verdict is what the break-even rule makes of a lookup's run of L2
// hits.
type l2Verdict struct {
	paid int // the leading hits the lookup counts (and prefetches)
	slow int // hits not counted: the estimate is below MinRate
	late int // hits not counted: they would not load within the budget
}

// judge applies the break-even rule to a lookup's run of L2 hits (their
// payload sizes), with the estimate e, the daemon's minRate (0: any rate
// pays) and the lookup's budget (0: none), the prefetch loading its keys
// in order, in the gets that batch makes of them:
//
//   - a cold estimate (no get measured yet) counts every hit: the first
//     prefetch is what measures;
//   - an estimated rate below minRate counts none;
//   - with a budget, a hit counts when the get that loads it (one get
//     after the other, at the estimated rate) ends within the budget;
//     the first get that would end past it, and everything after, does
//     not count.
func judge(e L2Estimate, minRate float64, budget time.Duration, batch batching, sizes []int64) l2Verdict {
	m := len(sizes)
	if e.Samples == 0 || (minRate <= 0 && budget <= 0) {
		return l2Verdict{paid: m}
	}
	if minRate > 0 && e.Rate < minRate {
		return l2Verdict{slow: m}
	}
	if budget <= 0 {
		return l2Verdict{paid: m}
	}
	if e.Rate <= 0 {
		return l2Verdict{late: m}
	}
	var bytes float64
	for at, end := 0, 0; at < m; at = end {
		end = batch.end(sizes, at)
		for _, s := range sizes[at:end] {
			bytes += float64(s)
		}
		if bytes/e.Rate > budget.Seconds() {
			return l2Verdict{paid: at, late: m - at}
		}
	}
	return l2Verdict{paid: m}
}

// L2Estimate returns the daemon's estimate of its L2 load rate; the zero
// estimate without an L2 tier.
func (s *Server) L2Estimate() L2Estimate {
	if s.l2 == nil {
		return L2Estimate{}
	}
	return s.l2.rate.estimate()
}

// batching is how a prefetch cuts its keys into gets (L2Config's
// PrefetchBatch and PrefetchBytes).
type batching struct {
	keys  int   // the keys a get carries at least
	bytes int64 // and more while their payloads stay within this
}

// end is where the get that starts at key at ends (exclusive), for keys
// of payloads sizes: keys keys, or to the end, then more while the get's
// payloads stay within bytes.
func (b batching) end(sizes []int64, at int) int {
	end := min(at+max(b.keys, 1), len(sizes))
	var sum int64
	for _, s := range sizes[at:end] {
		sum += s
	}
	for end < len(sizes) && sizes[end] <= b.bytes-sum {
		sum += sizes[end]
		end++
	}
	return end
}
