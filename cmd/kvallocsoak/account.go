//go:build linux

package main

import (
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// sample is everything the soak reads at one instant.
type sample struct {
	at      time.Duration // since the clients started
	stats   wire.Stats    // the daemon's stats answer
	debug   server.DebugReport
	clients totals // the boards, summed
	kills   int    // SIGKILLs sent so far
	proc    procStatus
	heap    int64 // go_memstats_heap_inuse_bytes
	touched int64 // the pool's bytes backed by memory
}

// row is one line of the table: what happened between two samples (the
// counters' differences) and where the gauges stood at the second.
type row struct {
	minute int           // 1, 2, ...
	span   time.Duration // a minute, or less for the last row
	// from the clients' boards
	calls, requests, lookups, hits uint64
	// from the daemon's stats
	grants, oomKeys, evictions, relReads, relWrites uint64
	kills                                           int
	// from /debug/verify
	verifies, verifyFailures, oomEvictableCalls uint64
	used, live                                  int64 // allocator used bytes; held + quarantined
	// memory
	rss, anon, shmem, heap, touched int64
}

// rowOf is the row of minute between samples prev and cur.
func rowOf(minute int, prev, cur sample) row {
	d := func(c int) uint64 { return cur.clients[c] - prev.clients[c] }
	return row{
		minute: minute, span: cur.at - prev.at,
		calls: d(cCalls), requests: d(cRequests), lookups: d(cLookups), hits: d(cHits),
		grants:    cur.stats.WriteReservations - prev.stats.WriteReservations,
		oomKeys:   cur.stats.OOMKeys - prev.stats.OOMKeys,
		evictions: cur.stats.Evictions - prev.stats.Evictions,
		relReads:  cur.stats.ReleasedReadLocks - prev.stats.ReleasedReadLocks,
		relWrites: cur.stats.ReleasedWrites - prev.stats.ReleasedWrites,
		kills:     cur.kills - prev.kills,
		verifies:  cur.debug.Checks - prev.debug.Checks, verifyFailures: cur.debug.CheckFailures - prev.debug.CheckFailures,
		oomEvictableCalls: cur.debug.OOMCallsEvictable - prev.debug.OOMCallsEvictable,
		used:              cur.debug.UsedBytes, live: cur.debug.HeldBytes + cur.debug.QuarantinedBytes,
		rss: cur.proc.VmRSS, anon: cur.proc.RssAnon, shmem: cur.proc.RssShmem, heap: cur.heap, touched: cur.touched,
	}
}

// rowHeader and format print the table.
const rowHeader = "  min   calls  requests  hit%   grants  oom_keys  evictions  kills  rel_reads  rel_writes  rss_MiB  anon_MiB  shmem_MiB  heap_MiB  touched_MiB  used_GiB  live_GiB   verify  oom_evictable"

func (r row) format() string {
	label := fmt.Sprintf("%5d", r.minute)
	if r.span < time.Minute-time.Second || r.span > time.Minute+time.Second {
		label = fmt.Sprintf("%4.0fs", r.span.Seconds())
	}
	hit := 0.0
	if r.lookups > 0 {
		hit = 100 * float64(r.hits) / float64(r.lookups)
	}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	gib := func(b int64) float64 { return float64(b) / (1 << 30) }
	verify := fmt.Sprintf("%d ok", r.verifies)
	if r.verifyFailures > 0 {
		verify = fmt.Sprintf("%d FAIL", r.verifyFailures)
	}
	return fmt.Sprintf("%s %7d %9d %5.1f %8d %9d %10d %6d %10d %11d %8.1f %9.1f %10.1f %9.1f %12.1f %9.3f %9.3f %8s %14d",
		label, r.calls, r.requests, hit, r.grants, r.oomKeys, r.evictions, r.kills, r.relReads, r.relWrites,
		mib(r.rss), mib(r.anon), mib(r.shmem), mib(r.heap), mib(r.touched), gib(r.used), gib(r.live), verify, r.oomEvictableCalls)
}

// rssBound is the bound on the daemon's RssAnon: the peak of the samples
// taken from the start to warmup after the pool first filled (the first
// eviction), plus bytes; it holds from then on.
type rssBound struct {
	warmup time.Duration
	bytes  int64
	full   time.Duration // when the pool first filled; 0 until then
	warm   int64         // the peak until full+warmup
	limit  int64         // 0 until warm
	warmAt time.Duration
	peak   int64
}

// observe checks one sample against the bound, or, while warming up,
// takes it into the warm value.
func (b *rssBound) observe(s sample) error {
	anon := s.proc.RssAnon
	b.peak = max(b.peak, anon)
	if b.limit == 0 {
		b.warm = max(b.warm, anon)
		if b.full == 0 && s.stats.Evictions > 0 {
			b.full = max(s.at, 1)
		}
		if b.full != 0 && s.at >= b.full+b.warmup {
			b.limit, b.warmAt = b.warm+b.bytes, s.at
		}
		return nil
	}
	if anon > b.limit {
		return fmt.Errorf("the daemon's RssAnon is %.1f MiB at %v, past its bound of %.1f MiB (its peak of %.1f MiB until %v, + %.0f MiB)",
			mb(anon), s.at.Round(time.Second), mb(b.limit), mb(b.warm), b.warmAt.Round(time.Second), mb(b.bytes))
	}
	return nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// checkVerify fails a Verify that found something, or whose used bytes
// are not the live objects', or that counted an out-of-memory answer
// with evictable objects present.
func checkVerify(r server.DebugReport, at time.Duration) error {
	switch {
	case len(r.Errors) > 0:
		return fmt.Errorf("Verify at %v: %d disagreements, the first: %s", at.Round(time.Second), len(r.Errors), r.Errors[0])
	case r.UsedBytes != r.HeldBytes+r.QuarantinedBytes:
		return fmt.Errorf("at %v the allocator uses %d bytes; the live objects hold %d and quarantine %d", at.Round(time.Second), r.UsedBytes, r.HeldBytes, r.QuarantinedBytes)
	case r.OOMCallsEvictable > 0:
		return fmt.Errorf("by %v, %d reserve_write calls were answered OUT_OF_MEMORY (%d keys) while an evictable object was present", at.Round(time.Second), r.OOMCallsEvictable, r.OOMKeysEvictable)
	}
	return nil
}
