//go:build linux

package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The trace's own rate, for the time compression: the conversation
// trace's 12,031 requests arrived over 3,537 s.
const traceRequests, traceSeconds = 12031, 3537

// summary prints the totals, the rates per hour, the kills by phase and
// the memory, after the table.
func (s *soaker) summary(failure error) {
	end := s.last
	if s.final != nil {
		end = *s.final
	}
	w := s.out
	hours := end.at.Hours()
	perHour := func(n uint64) string {
		if hours <= 0 {
			return "-"
		}
		return grouped(uint64(float64(n)/hours + 0.5))
	}
	c := end.clients
	secs := end.at.Seconds()
	rate := float64(c[cRequests]) / secs
	hit := 0.0
	if c[cLookups] > 0 {
		hit = 100 * float64(c[cHits]) / float64(c[cLookups])
	}
	st := end.stats
	fmt.Fprintf(w, "summary: %v of clients: %s requests (%.0f/s, %.0f× the trace's %.1f/s: %.1f h of its traffic), %s calls (%.0f/s), block hit rate %.1f %%\n",
		end.at.Round(time.Second), grouped(c[cRequests]), rate, rate/(traceRequests/traceSeconds), float64(traceRequests)/traceSeconds,
		float64(c[cRequests])/(traceRequests/traceSeconds)/3600, grouped(c[cCalls]), float64(c[cCalls])/secs, hit)
	fmt.Fprintf(w, "summary: stamps checked on %s objects read, written on %s; reserve_write: %s keys, %s granted, %s KEY_NOT_WRITABLE, %s OUT_OF_MEMORY; %s evictions\n",
		grouped(c[cVerified]), grouped(c[cStamped]), grouped(c[cWriteKeys]), grouped(c[cGrants]), grouped(c[cNotWritable]), grouped(c[cOOM]), grouped(st.Evictions))
	kills := s.sup.killsSoFar()
	fmt.Fprintf(w, "summary: %d kills (%s/h) in %d cycles' worth of requests; released on disconnect: %s read locks, %s writes, %.1f GiB; %s connections closed\n",
		len(kills), perHour(uint64(len(kills))), c[cRequests]/uint64(s.cfg.cycle), grouped(st.ReleasedReadLocks), grouped(st.ReleasedWrites),
		float64(st.ReleasedBytes)/(1<<30), grouped(st.ConnsClosed))
	fmt.Fprintf(w, "summary: kills by phase: %s\n", byPhase(kills))
	v := end.debug
	fmt.Fprintf(w, "summary: OUT_OF_MEMORY answers: %s calls (%s/h), %s keys (%s/h)\n",
		grouped(v.OOMCalls), perHour(v.OOMCalls), grouped(v.OOMKeys), perHour(v.OOMKeys))
	fmt.Fprintf(w, "summary: allocation failures with evictable objects present: %s calls, %s/h (target 0); LMCache issue 3187: %s–%s a day on one server, %s–%s/h\n",
		grouped(v.OOMCallsEvictable), perHour(v.OOMCallsEvictable), grouped(lmcacheLow), grouped(lmcacheHigh), grouped(lmcacheLow/24), grouped(lmcacheHigh/24))
	if s.rss.limit == 0 {
		fmt.Fprintf(w, "summary: the daemon's RssAnon peaked at %.1f MiB; it was still warming up (the bound starts %v after the pool first filled); at the end VmRSS %.1f MiB, Go heap %.1f MiB\n",
			mb(s.rss.peak), s.rss.warmup, mb(end.proc.VmRSS), mb(end.heap))
	} else {
		fmt.Fprintf(w, "summary: the daemon's RssAnon %.1f MiB when warm (its peak until %v), peak %.1f MiB, bound %.1f MiB; at the end VmRSS %.1f MiB, RssShmem %.1f MiB, Go heap %.1f MiB; the pool's touched pages (the stamps', in the clients' RSS) %.1f MiB\n",
			mb(s.rss.warm), s.rss.warmAt.Round(time.Second), mb(s.rss.peak), mb(s.rss.limit), mb(end.proc.VmRSS), mb(end.proc.RssShmem), mb(end.heap), mb(end.touched))
	}
	fmt.Fprintf(w, "summary: Verify ran %s times, %s failed; used bytes = live objects at every one that passed\n", grouped(v.Checks), grouped(v.CheckFailures))
	if failure != nil {
		fmt.Fprintf(w, "summary: stopped early by the failure below\n")
	}
}

// byPhase counts kills by the client's phase when they were sent.
func byPhase(kills []killRecord) string {
	if len(kills) == 0 {
		return "none"
	}
	n := map[uint64]int{}
	for _, k := range kills {
		n[k.phase]++
	}
	phases := make([]uint64, 0, len(n))
	for p := range n {
		phases = append(phases, p)
	}
	sort.Slice(phases, func(i, j int) bool { return n[phases[i]] > n[phases[j]] })
	var parts []string
	for _, p := range phases {
		name := "?"
		if p < numPhases {
			name = phaseNames[p]
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, n[p]))
	}
	return strings.Join(parts, ", ")
}

// grouped writes n with thousands separators.
func grouped(n uint64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
