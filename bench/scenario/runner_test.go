package scenario

import (
	"bytes"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
)

func parse(t *testing.T, src string) *Scenario {
	t.Helper()
	sc, err := Parse("test", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func run1(t *testing.T, sc *Scenario, p sim.Policy, opt Options) *Result {
	t.Helper()
	r, err := Run(sc, p, opt)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, r)
	return r
}

var defaultPolicy = policy(sim.PrefixOnePass, allocator.ContiguousFirst, sim.OnDemand)

// TestPlainCalls drives every plain l1 call through the runner, with the
// model checked against l1 after every operation.
func TestPlainCalls(t *testing.T) {
	sc := parse(t, `layout c 64KiB
pool 16*c
reserve-write w c 4                 # 1: four new keys, write-locked
finish-write w[0:2]                 # 2
abort-write w[2:]                   # 3: discards w2, w3
reserve-write w c 4 mode=new        # 4: w0, w1 exist; w2, w3 allocated again
finish-write-reserve-read w[2:] locks=2
finish-read w[2:] locks=2
store t c 2 temp                    # 7: temporary objects
read t                              # 8: the last read frees them
delete w[0]                         # 9
touch w
reserve-write w c 4 mode=update     # 11: w1..w3 re-locked, w0 missing: nothing to allocate
finish-write w
evict-to 0                          # 13: evicts w1..w3
store x c 3
clear force                         # 15
restore y c 2 locks=3
finish-read y locks=3
`)
	for _, p := range Policies() {
		for _, fill := range []Fill{FillEnds, FillFull, FillNone} {
			r := run1(t, sc, p, Options{Check: true, Fill: fill})
			req := func(i int) int64 { return r.Steps[i-1].Requested }
			if req(1) != 4 || req(4) != 2 || req(7) != 2 || req(11) != 0 || req(14) != 3 || req(16) != 2 {
				t.Fatalf("%s: steps %+v", p, r.Steps)
			}
			if r.Granted != 13 || r.Evictions != 3 || r.Steps[12].Evictions != 3 {
				t.Errorf("%s: granted %d, evictions %d (evict-to %d); want 13, 3, 3", p, r.Granted, r.Evictions, r.Steps[12].Evictions)
			}
			if r.Reads != 2 || r.ReadHits != 2 {
				t.Errorf("%s: reads %d hits %d, want 2 and 2", p, r.Reads, r.ReadHits)
			}
		}
	}
}

// TestLockPastTTL: a read lock held past the read TTL lapses in l1 but not
// in the scenario; the run must fail instead of reporting a wrong oracle.
func TestLockPastTTL(t *testing.T) {
	sc := parse(t, "ttl read=10s\nlayout c 64KiB\npool 4*c\nstore s c 2\nreserve-read s\nadvance 11s\n")
	_, err := Run(sc, defaultPolicy, Options{})
	if err == nil || !strings.Contains(err.Error(), "TTL") {
		t.Fatalf("error %v, want one naming the TTL", err)
	}
	// A write lock that lapses is reclaimed by l1 and reported to the
	// listener, so the model follows it.
	sc = parse(t, "ttl write=10s\nlayout c 64KiB\npool 4*c\nreserve-write s c 2\nadvance 11s\nstore t c 4\n")
	r := run1(t, sc, defaultPolicy, Options{Check: true})
	if last(r).Granted != 4 {
		t.Errorf("after the lapse: granted %d, want 4", last(r).Granted)
	}
}

// TestDeterministic: the same scenario and policy give the same result.
func TestDeterministic(t *testing.T) {
	cases := []struct {
		file string
		p    sim.Policy
		cut  time.Duration
	}{
		{"4-sustained-burst.scn", policy(sim.PrefixBinarySearch, allocator.Contiguous, sim.Periodic), 6 * time.Minute}, // one burst
		{"5-mixed-layouts.scn", defaultPolicy, 3 * time.Minute},
	}
	for _, c := range cases {
		sc := load(t, c.file)
		opt := Options{MaxTraffic: c.cut, Fill: FillNone}
		a, b := run1(t, sc, c.p, opt), run1(t, sc, c.p, opt)
		a.Wall, b.Wall = 0, 0
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s %s: two runs differ:\n%+v\n%+v", c.file, c.p, a, b)
		}
		if a.Requested == 0 || (c.p.Control == sim.Periodic && a.FailedCalls == 0) {
			t.Errorf("%s %s: requested %d, failed calls %d: not the intended load", c.file, c.p, a.Requested, a.FailedCalls)
		}
	}
}

// TestTrafficRate: arrivals follow the stream's rate and burst shape.
func TestTrafficRate(t *testing.T) {
	sc := parse(t, `layout c 4KiB
pool 4096*c
stream s layout=c rate=2/s chunks=1 burst-every=10m burst-len=1m burst-x=10
traffic 1h s
`)
	r := run1(t, sc, defaultPolicy, Options{Fill: FillNone})
	// 55 min at 2/s plus 5 bursts of 1 min at 20/s.
	want := 55*60*2 + 5*60*20.0
	if got := float64(r.Calls); got < 0.95*want || got > 1.05*want {
		t.Errorf("%v requests, want %v ± 5%%", got, want)
	}
	// Reads: every arrival after the first re-reads the previous store.
	sc = parse(t, `layout c 4KiB
pool 64*c
stream s layout=c rate=1/s chunks=2 reads=100% reuse=recent hold=1s
traffic 10m s
`)
	r = run1(t, sc, defaultPolicy, Options{Check: true})
	if r.Calls != 1 || r.Reads < 1000 || r.ReadHits != r.Reads {
		t.Errorf("stores %d, reads %d, hits %d; want 1 store and every read a hit", r.Calls, r.Reads, r.ReadHits)
	}
}

// TestProgress: the counters a caller watches reach the totals.
func TestProgress(t *testing.T) {
	sc := load(t, "3-oom-below-watermark.scn")
	var sim, fin atomic.Int64
	pols := Policies()[:4]
	if _, err := RunMatrix([]*Scenario{sc}, pols, Options{Progress: &sim, Finished: &fin}, 3); err != nil {
		t.Fatal(err)
	}
	if sim.Load() != int64(4*5*time.Second) || fin.Load() != 4 {
		t.Errorf("progress %v, finished %d; want 20s and 4", time.Duration(sim.Load()), fin.Load())
	}
}

func TestReport(t *testing.T) {
	sc := load(t, "2-tail-first-eviction.scn")
	rs, err := RunMatrix([]*Scenario{sc}, Policies(), Options{}, 2)
	if err != nil {
		t.Fatal(err)
	}
	var txt, md bytes.Buffer
	if err := WriteText(&txt, []*Scenario{sc}, rs); err != nil {
		t.Fatal(err)
	}
	if err := WriteMarkdown(&md, []*Scenario{sc}, rs, "# Title"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== tail-first-eviction", "onepass/contiguous/periodic", "failed w/ free", "contiguous fails while free bytes suffice"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, txt.String())
		}
	}
	lines := strings.Split(md.String(), "\n")
	var rows int
	for _, l := range lines {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| policy") {
			rows++
			if n := strings.Count(l, "|"); n != len(Columns)+1 {
				t.Errorf("row with %d cells: %q", n-1, l)
			}
		}
	}
	if rows != 18 || lines[0] != "# Title" || !strings.Contains(md.String(), "### tail-first-eviction") ||
		!strings.Contains(md.String(), "> scattered and contiguous-first grant all 32.") {
		t.Errorf("markdown report (%d rows):\n%s", rows, md.String())
	}
	if got := Row(rs[0]); len(got) != len(Columns) {
		t.Errorf("Row has %d cells, Columns %d", len(got), len(Columns))
	}
}

func TestPlot(t *testing.T) {
	sc := load(t, "4-sustained-burst.scn")
	var pols []sim.Policy
	for _, name := range sc.Plot.Policies {
		p, err := ParsePolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, p)
	}
	rs, err := RunMatrix([]*Scenario{sc}, pols, Options{MaxTraffic: 2 * time.Minute, Fill: FillNone}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rs[0].Series); n != 2*60/30+1+1 {
		t.Errorf("%d samples, want one every 30 s and a last one", n)
	}
	var svg, png bytes.Buffer
	if err := WritePlot(&svg, "svg", sc, rs); err != nil {
		t.Fatal(err)
	}
	if err := WritePlot(&png, "png", sc, rs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(svg.String(), "<svg") || !strings.Contains(svg.String(), "on-demand") {
		t.Errorf("SVG output: %.200s", svg.String())
	}
	if !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("PNG output starts %q", png.Bytes()[:8])
	}
	dir := t.TempDir()
	if err := WritePlotFile(dir+"/p.svg", sc, rs); err != nil {
		t.Error(err)
	}
	if err := WritePlotFile(dir+"/p.gif", sc, rs); err == nil {
		t.Error("a .gif plot was accepted")
	}
	if err := WritePlot(&svg, "svg", load(t, "1-seed-restore.scn"), rs); err == nil {
		t.Error("plotted a scenario without a plot directive")
	}
}
