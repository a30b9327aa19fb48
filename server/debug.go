//go:build linux

package server

import (
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Config.DebugVerify (kvallocd -debug-verify) is for soaks and
// investigations, not for serving:
//
//   - GET /debug/verify on the metrics listener runs Verify (Check's
//     checks: the ledgers against l1's locks, l1's counts against its
//     objects, allocator.Verify, used bytes against the objects' and the
//     quarantined) and answers its DebugReport as JSON, status 200 whether
//     or not it found something; the metrics count the runs and the
//     failures.
//   - Every reserve_write holds every other request off while it runs
//     (the gate, exclusive, where requests otherwise share it). When its
//     answer has OUT_OF_MEMORY keys, the daemon then looks, before any
//     other request can change anything, for an evictable object (finished,
//     unlocked) not named in the call whose block is at least the call's
//     size: an object on-demand eviction could have taken. Such a call is
//     an allocation failure with evictable objects present, which l1's
//     on-demand eviction must never leave; it is counted, and logged.

// debugCounts are the counts DebugVerify keeps (Verify's always).
type debugCounts struct {
	checks, checkFailures                                  atomic.Uint64
	oomCalls, oomKeys, oomCallsEvictable, oomKeysEvictable atomic.Uint64
}

// DebugReport is the answer of /debug/verify: one Verify, and the counts
// since the daemon started.
type DebugReport struct {
	VerifyReport
	// Checks counts Verify and Check runs, CheckFailures those that found
	// a disagreement.
	Checks        uint64 `json:"checks"`
	CheckFailures uint64 `json:"check_failures"`
	// OOMCalls counts reserve_write calls answered with at least one
	// OUT_OF_MEMORY key, OOMKeys those keys; OOMCallsEvictable and
	// OOMKeysEvictable the calls, and their OUT_OF_MEMORY keys, that left
	// an evictable object they could have taken (see Config.DebugVerify).
	OOMCalls          uint64 `json:"oom_calls"`
	OOMKeys           uint64 `json:"oom_keys"`
	OOMCallsEvictable uint64 `json:"oom_calls_evictable"`
	OOMKeysEvictable  uint64 `json:"oom_keys_evictable"`
}

// Debug runs Verify and returns it with the debug counts.
func (s *Server) Debug() DebugReport {
	r := DebugReport{VerifyReport: s.Verify()}
	d := &s.dbg
	r.Checks, r.CheckFailures = d.checks.Load(), d.checkFailures.Load()
	r.OOMCalls, r.OOMKeys = d.oomCalls.Load(), d.oomKeys.Load()
	r.OOMCallsEvictable, r.OOMKeysEvictable = d.oomCallsEvictable.Load(), d.oomKeysEvictable.Load()
	return r
}

// noteOOM judges a reserve_write's answer, with the gate held exclusively
// (DebugVerify): see Config.DebugVerify.
func (s *Server) noteOOM(q *wire.Request, a *wire.Answer) {
	oom := 0
	for _, r := range a.Results {
		if r.Status == wire.StatusOutOfMemory {
			oom++
		}
	}
	if oom == 0 {
		return
	}
	d := &s.dbg
	d.oomCalls.Add(1)
	d.oomKeys.Add(uint64(oom))
	named := make(map[l1.ObjectKey]struct{}, len(q.Keys))
	for _, k := range q.Keys {
		named[k] = struct{}{}
	}
	align := s.alloc.Align()
	need := (q.Size + align - 1) / align * align
	evictable := 0
	for _, e := range s.mgr.Snapshot() {
		if _, in := named[e.Key]; e.Evictable && !in && e.Block.Size >= need {
			evictable++
		}
	}
	if evictable == 0 {
		return
	}
	d.oomCallsEvictable.Add(1)
	d.oomKeysEvictable.Add(uint64(oom))
	st := s.alloc.Stats()
	s.log.Warn("out of memory with evictable objects present", "keys", len(q.Keys), "oom_keys", oom,
		"size", q.Size, "evictable", evictable, "used", st.Used, "capacity", st.Capacity)
}

// serveDebug answers /debug/verify.
func (s *Server) serveDebug(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.Debug())
}

var (
	descChecks     = prometheus.NewDesc("kvalloc_daemon_verify_total", "Verify runs (-debug-verify).", nil, nil)
	descCheckFails = prometheus.NewDesc("kvalloc_daemon_verify_failures_total", "Verify runs that found a disagreement.", nil, nil)
	descOOMCalls   = prometheus.NewDesc("kvalloc_daemon_oom_calls_total", "reserve_write calls answered with OUT_OF_MEMORY keys (-debug-verify).", nil, nil)
	descOOMEvCalls = prometheus.NewDesc("kvalloc_daemon_oom_evictable_calls_total", "reserve_write calls answered with OUT_OF_MEMORY keys while an evictable object they could have taken was present (-debug-verify).", nil, nil)
	descOOMEvKeys  = prometheus.NewDesc("kvalloc_daemon_oom_evictable_keys_total", "OUT_OF_MEMORY keys of those calls.", nil, nil)
	debugDescs     = []*prometheus.Desc{descChecks, descCheckFails, descOOMCalls, descOOMEvCalls, descOOMEvKeys}
)

// collectDebug sends the debug counters.
func (s *Server) collectDebug(ch chan<- prometheus.Metric) {
	d := &s.dbg
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{descChecks, d.checks.Load()}, {descCheckFails, d.checkFailures.Load()}, {descOOMCalls, d.oomCalls.Load()},
		{descOOMEvCalls, d.oomCallsEvictable.Load()}, {descOOMEvKeys, d.oomKeysEvictable.Load()}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}
