//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// sampleAt is a sample at t with counters from n: the clients' counts n,
// 2n, ... by counter, the daemon's counters n times their place.
func sampleAt(t time.Duration, n uint64) sample {
	var s sample
	s.at = t
	for i := range s.clients {
		s.clients[i] = n * uint64(i+1)
	}
	s.stats = wire.Stats{WriteReservations: 10 * n, OOMKeys: 20 * n, Evictions: 30 * n, ReleasedReadLocks: 40 * n, ReleasedWrites: 50 * n}
	s.kills = int(60 * n)
	s.debug = server.DebugReport{Checks: 70 * n, CheckFailures: 0, OOMCallsEvictable: 0}
	s.debug.UsedBytes, s.debug.HeldBytes, s.debug.QuarantinedBytes = int64(n<<30), int64(3*n<<28), int64(n<<28)
	s.proc = procStatus{VmRSS: int64(5 << 20 * n), RssAnon: int64(3 << 20 * n), RssShmem: int64(n << 20)}
	s.heap, s.touched = int64(2<<20*n), int64(7<<20*n)
	return s
}

// TestRowOf: a row is the counters' differences between its two samples,
// from the boards, the daemon's stats and its Verify, and the gauges of
// the second.
func TestRowOf(t *testing.T) {
	prev, cur := sampleAt(time.Minute, 1), sampleAt(2*time.Minute, 4)
	r := rowOf(2, prev, cur)
	want := row{minute: 2, span: time.Minute,
		calls: 3 * (cCalls + 1), requests: 3 * (cRequests + 1), lookups: 3 * (cLookups + 1), hits: 3 * (cHits + 1),
		grants: 30, oomKeys: 60, evictions: 90, relReads: 120, relWrites: 150, kills: 180, verifies: 210,
		used: 4 << 30, live: 4 << 30, rss: 20 << 20, anon: 12 << 20, shmem: 4 << 20, heap: 8 << 20, touched: 28 << 20}
	if r != want {
		t.Fatalf("rowOf:\n got %+v\nwant %+v", r, want)
	}
	f := r.format()
	if !strings.HasPrefix(f, "    2 ") || !strings.Contains(f, " 210 ok ") || !strings.Contains(f, " 4.000     4.000 ") {
		t.Errorf("format: %q", f)
	}
	cur.debug.CheckFailures = 2
	cur.at = prev.at + 25*time.Second
	f = rowOf(3, prev, cur).format()
	if !strings.HasPrefix(f, "  25s ") || !strings.Contains(f, " 2 FAIL ") {
		t.Errorf("a partial row with failures: %q", f)
	}
	if fields, head := len(strings.Fields(rowOf(1, prev, sampleAt(2*time.Minute, 2)).format())), len(strings.Fields(rowHeader)); fields != head+1 {
		t.Errorf("a row has %d fields, the header %d (+1 for verify's ok)", fields, head)
	}
}

// TestRSSBound: the bound is the peak RssAnon until warmup after the first
// eviction, plus the slack; it does not hold before, and holds after.
func TestRSSBound(t *testing.T) {
	b := rssBound{warmup: 30 * time.Second, bytes: 64 << 20}
	at := func(t time.Duration, anon int64, evictions uint64) sample {
		var s sample
		s.at, s.proc.RssAnon, s.stats.Evictions = t, anon, evictions
		return s
	}
	steps := []struct {
		s    sample
		fail bool
	}{
		{at(5*time.Second, 500<<20, 0), false},             // warming, the pool not full: no bound
		{at(10*time.Second, 20<<20, 1), false},             // full at 10 s
		{at(30*time.Second, 30<<20, 5), false},             // still warming
		{at(40*time.Second, 25<<20, 9), false},             // warm: the peak so far (500 MiB) + 64 MiB
		{at(50*time.Second, 500<<20+64<<20, 9), false},     // at the bound
		{at(60*time.Second, 500<<20+64<<20+4096, 9), true}, // past it
	}
	for i, st := range steps {
		err := b.observe(st.s)
		if (err != nil) != st.fail {
			t.Fatalf("step %d: %v (bound %d)", i, err, b.limit)
		}
		if i == 3 && (b.limit != 564<<20 || b.warmAt != 40*time.Second) {
			t.Fatalf("warm: limit %d at %v", b.limit, b.warmAt)
		}
	}
	if err := b.observe(at(70*time.Second, 600<<20, 9)); err == nil || !strings.Contains(err.Error(), "past its bound of 564.0 MiB") {
		t.Fatalf("the message: %v", err)
	}
	if b.peak != 600<<20 {
		t.Fatalf("peak %d", b.peak)
	}
}

// TestCheckVerify: a Verify fails the soak on a disagreement, on used
// bytes that are not the live objects', and on an allocation failure with
// evictable objects present; a clean one passes.
func TestCheckVerify(t *testing.T) {
	ok := server.DebugReport{}
	ok.UsedBytes, ok.HeldBytes, ok.QuarantinedBytes = 3<<23, 2<<23, 1<<23
	ok.OOMCalls = 5 // out of memory with nothing evictable is a status, not a failure
	if err := checkVerify(ok, time.Second); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.Errors = []string{"x holds 1 read locks under lease 7; open connections record 0"}
	if err := checkVerify(bad, time.Second); err == nil || !strings.Contains(err.Error(), "read locks under lease") {
		t.Errorf("a disagreement: %v", err)
	}
	bad = ok
	bad.UsedBytes += 4096
	if err := checkVerify(bad, time.Second); err == nil || !strings.Contains(err.Error(), "allocator uses") {
		t.Errorf("drift: %v", err)
	}
	bad = ok
	bad.OOMCallsEvictable, bad.OOMKeysEvictable = 1, 3
	if err := checkVerify(bad, time.Second); err == nil || !strings.Contains(err.Error(), "evictable") {
		t.Errorf("an allocation failure with evictable objects: %v", err)
	}
}

// TestParseProcStatus reads the memory lines of /proc/PID/status, and this
// process's own.
func TestParseProcStatus(t *testing.T) {
	p, err := parseProcStatus([]byte("Name:\tkvallocd\nVmRSS:\t   12188 kB\nRssAnon:\t    1684 kB\nRssFile:\t   10504 kB\nRssShmem:\t       0 kB\n"))
	if err != nil || p != (procStatus{VmRSS: 12188 << 10, RssAnon: 1684 << 10, RssFile: 10504 << 10}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if _, err := parseProcStatus([]byte("VmRSS:\t1 kB\n")); err == nil {
		t.Error("a status without RssAnon")
	}
	if _, err := parseProcStatus([]byte("VmRSS:\tlots kB\nRssAnon:\t1 kB\nRssFile:\t1 kB\nRssShmem:\t1 kB\n")); err == nil {
		t.Error("a malformed line")
	}
	if p, err := readProcStatus(0); err == nil || p.VmRSS != 0 {
		t.Errorf("pid 0: %+v, %v", p, err)
	}
}

// TestMetricValue finds an unlabelled sample in the text format.
func TestMetricValue(t *testing.T) {
	text := "# HELP go_memstats_heap_inuse_bytes x\n# TYPE go_memstats_heap_inuse_bytes gauge\ngo_memstats_heap_inuse_bytes_total 9\ngo_memstats_heap_inuse_bytes 1.2582912e+07\n"
	if v, err := metricValue(strings.NewReader(text), "go_memstats_heap_inuse_bytes"); err != nil || v != 12582912 {
		t.Fatalf("%d, %v", v, err)
	}
	if _, err := metricValue(strings.NewReader("other 1\n"), "go_memstats_heap_inuse_bytes"); err == nil {
		t.Error("a missing metric")
	}
}

func mustPool(s string) trace.Pool {
	p, err := trace.ParsePool(s)
	if err != nil {
		panic(err)
	}
	return p
}
