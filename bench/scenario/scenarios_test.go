package scenario

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
)

// The scenarios testdata/scenarios holds, each asserted as its file's
// comments and outcome lines state.

const scenarioDir = "../../testdata/scenarios"

func load(t *testing.T, file string) *Scenario {
	t.Helper()
	sc, err := ParseFile(filepath.Join(scenarioDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// runPolicies runs sc under pols and returns the results by policy.
func runPolicies(t *testing.T, sc *Scenario, pols []sim.Policy, opt Options) map[sim.Policy]*Result {
	t.Helper()
	rs, err := RunMatrix([]*Scenario{sc}, pols, opt, 2)
	if err != nil {
		t.Fatal(err)
	}
	out := map[sim.Policy]*Result{}
	for _, r := range rs {
		checkInvariants(t, r)
		out[r.Policy] = r
	}
	return out
}

// checkInvariants holds for every result of every scenario.
func checkInvariants(t *testing.T, r *Result) {
	t.Helper()
	if r.Requested != r.Granted+r.OOMKeys {
		t.Errorf("%s %s: requested %d != granted %d + OOM %d", r.Scenario, r.Policy, r.Requested, r.Granted, r.OOMKeys)
	}
	if r.Granted > r.Ideal || r.Ideal > r.Requested {
		t.Errorf("%s %s: want granted %d ≤ ideal %d ≤ requested %d", r.Scenario, r.Policy, r.Granted, r.Ideal, r.Requested)
	}
	if r.FailedWithFree > r.FailedCalls || r.FailedCalls > r.Calls {
		t.Errorf("%s %s: want failed w/ free %d ≤ failed %d ≤ calls %d", r.Scenario, r.Policy, r.FailedWithFree, r.FailedCalls, r.Calls)
	}
	if r.PeakFrag < r.MeanFrag || r.PeakFrag > 1 || r.MeanFrag < 0 {
		t.Errorf("%s %s: fragmentation peak %v mean %v", r.Scenario, r.Policy, r.PeakFrag, r.MeanFrag)
	}
	if r.Policy.Control == sim.OnDemand && r.Sweeps != 0 {
		t.Errorf("%s %s: %d periodic sweeps under on-demand eviction", r.Scenario, r.Policy, r.Sweeps)
	}
	if r.Policy.Prefix != sim.PrefixBinarySearch && r.Probes != 0 {
		t.Errorf("%s %s: %d probes without binary search", r.Scenario, r.Policy, r.Probes)
	}
	var sum Step
	for _, s := range r.Steps {
		sum.Requested += s.Requested
		sum.Granted += s.Granted
		sum.Evictions += s.Evictions
	}
	if sum.Requested != r.Requested || sum.Granted != r.Granted || sum.Evictions != r.Evictions {
		t.Errorf("%s %s: steps add up to %+v, totals are %d/%d/%d", r.Scenario, r.Policy, sum, r.Requested, r.Granted, r.Evictions)
	}
}

// last returns the step of the last operation.
func last(r *Result) Step { return r.Steps[len(r.Steps)-1] }

// TestSeedRestore: a 5700-chunk restore into a pool of 4560 objects.
// none grants 0; binarysearch and onepass grant 4560; onepass makes no
// probe and one allocator call for the restore. With on-demand eviction
// too: the pool's capacity cannot hold 5700 objects whatever is evicted,
// so l1 does not make the full call that must fail (knownShortLocked)
// and goes to eviction, then to the prefix, at once.
func TestSeedRestore(t *testing.T) {
	sc := load(t, "1-seed-restore.scn")
	if got := sc.Slots(0); got != 4560 {
		t.Fatalf("pool holds %d objects, want 4560", got)
	}
	for p, r := range runPolicies(t, sc, Policies(), Options{Check: true}) {
		s := last(r)
		if s.Kind != OpRestore || s.Requested != 5700 {
			t.Fatalf("%s: last step %+v, want a 5700-key restore", p, s)
		}
		want := int64(4560)
		if p.Prefix == sim.PrefixNone {
			want = 0
		}
		if s.Granted != want || s.OOMKeys != 5700-want || s.Ideal != 4560 {
			t.Errorf("%s: granted %d, OOM %d, ideal %d; want %d, %d, 4560", p, s.Granted, s.OOMKeys, s.Ideal, want, 5700-want)
		}
		switch p.Prefix {
		case sim.PrefixOnePass:
			if r.Probes != 0 || r.AllocCalls != 1 {
				t.Errorf("%s: %d probes, %d allocator calls; want 0 and 1", p, r.Probes, r.AllocCalls)
			}
		case sim.PrefixBinarySearch:
			// ⌈log2 5699⌉ = 13 probes over [1, 5699], plus the final
			// allocation, plus the failed full call without on-demand
			// eviction (with it, l1 knows the call must fail).
			wantCalls := uint64(15)
			if p.Control == sim.OnDemand {
				wantCalls = 14
			}
			if r.Probes != 13 || r.AllocCalls != wantCalls {
				t.Errorf("%s: %d probes, %d allocator calls; want 13 and %d", p, r.Probes, r.AllocCalls, wantCalls)
			}
		}
	}
}

// TestTailFirstEviction: eviction frees the last chunk of each of 32
// requests; a 32-chunk restore then fails under contiguous placement
// although exactly enough bytes are free, and succeeds under scattered
// and contiguous-first.
func TestTailFirstEviction(t *testing.T) {
	sc := load(t, "2-tail-first-eviction.scn")
	for p, r := range runPolicies(t, sc, Policies(), Options{Check: true}) {
		if r.Evictions != 32 {
			t.Errorf("%s: %d evictions, want the 32 tails", p, r.Evictions)
		}
		s := last(r)
		if s.Kind != OpRestore || s.Requested != 32 || s.Ideal != 32 {
			t.Fatalf("%s: last step %+v, want a 32-key restore with 32 grantable", p, s)
		}
		// Where the tails went: the sweep at t = 1 s, or the restore.
		evictedBy := r.Steps[len(r.Steps)-2]
		if p.Control == sim.OnDemand {
			evictedBy = s
		}
		if evictedBy.Evictions != 32 {
			t.Errorf("%s: step %s evicted %d, want 32", p, evictedBy.Kind, evictedBy.Evictions)
		}
		if p.Placement == allocator.Contiguous {
			want := int64(1) // the longest free run is one chunk
			if p.Prefix == sim.PrefixNone {
				want = 0
			}
			if s.Granted != want || s.FailedWithFree != 1 {
				t.Errorf("%s: granted %d, failed with free bytes %d; want %d and 1", p, s.Granted, s.FailedWithFree, want)
			}
		} else if s.Granted != 32 || s.FailedCalls != 0 {
			t.Errorf("%s: granted %d with %d failed calls, want all 32", p, s.Granted, s.FailedCalls)
		}
	}
}

// TestOOMBelowWatermark: 18 of 28 chunks resident (64 %), an 11-chunk
// restore. The periodic sweep runs 5 times and never fires, and the
// restore is cut; on-demand eviction evicts one chunk and grants all 11.
func TestOOMBelowWatermark(t *testing.T) {
	sc := load(t, "3-oom-below-watermark.scn")
	for p, r := range runPolicies(t, sc, Policies(), Options{Check: true}) {
		s := last(r)
		if s.Kind != OpRestore || s.Requested != 11 || s.Ideal != 11 {
			t.Fatalf("%s: last step %+v, want an 11-key restore with 11 grantable", p, s)
		}
		if r.Steps[0].Granted != 18 {
			t.Fatalf("%s: %d chunks resident, want 18", p, r.Steps[0].Granted)
		}
		if p.Control == sim.Periodic {
			want := int64(10)
			if p.Prefix == sim.PrefixNone {
				want = 0
			}
			if r.Sweeps != 5 || r.SweepsFired != 0 || r.Evictions != 0 {
				t.Errorf("%s: %d sweeps, %d fired, %d evictions; want 5, 0, 0", p, r.Sweeps, r.SweepsFired, r.Evictions)
			}
			if s.Granted != want || s.FailedCalls != 1 {
				t.Errorf("%s: restore granted %d (%d failed calls), want %d, cut", p, s.Granted, s.FailedCalls, want)
			}
		} else if s.Granted != 11 || s.Evictions != 1 {
			t.Errorf("%s: restore granted %d with %d evictions, want 11 with 1", p, s.Granted, s.Evictions)
		}
	}
}

// sustainedCut is the test-sized variant of 4-sustained-burst.scn: the
// same file with traffic cut to 16 simulated minutes, two bursts (minutes
// 5-6 and 15-16), as the file says.
const sustainedCut = 16 * time.Minute

// TestSustainedBurst: periodic failures appear in the first burst and pile
// up in the second; on-demand eviction keeps failures at 0.
func TestSustainedBurst(t *testing.T) {
	sc := load(t, "4-sustained-burst.scn")
	if sc.Plot == nil {
		t.Fatal("no plot directive")
	}
	at := func(r *Result, d time.Duration) Sample {
		for _, s := range r.Series {
			if s.T >= d {
				return s
			}
		}
		t.Fatalf("%s: no sample at %s", r.Policy, d)
		return Sample{}
	}
	// Every placement and eviction with the default prefix: a prefix
	// only matters once a batch fails, and under on-demand eviction none
	// does (the full run in make scenarios covers all 18 policies).
	// Objects are not filled: the other tests cover filling.
	pols, err := MatchPolicies("onepass/*/*")
	if err != nil {
		t.Fatal(err)
	}
	for p, r := range runPolicies(t, sc, pols, Options{MaxTraffic: sustainedCut, Fill: FillNone}) {
		if r.Sim != sustainedCut {
			t.Fatalf("%s: simulated %s, want %s", p, r.Sim, sustainedCut)
		}
		if p.Control == sim.OnDemand {
			if r.FailedCalls != 0 || r.OOMKeys != 0 {
				t.Errorf("%s: %d failed calls, %d OOM keys; want 0", p, r.FailedCalls, r.OOMKeys)
			}
			continue
		}
		before := at(r, 5*time.Minute).FailedCalls  // before the first burst
		first := at(r, 10*time.Minute).FailedCalls  // after it
		second := at(r, 16*time.Minute).FailedCalls // after the second
		if !(first > before && second > first && first-before >= 100) || r.SweepsFired == 0 {
			t.Errorf("%s: failed calls %d before, %d after the first burst, %d after the second (sweeps fired %d); want them to pile up",
				p, before, first, second, r.SweepsFired)
		}
	}
}

// mixedCut is the test-sized variant of 5-mixed-layouts.scn.
const mixedCut = 6 * time.Minute

// TestMixedLayouts: under periodic eviction, contiguous placement has more
// failed calls, and more failed calls with free bytes, than scattered and
// contiguous-first; under on-demand eviction no placement fails, and
// contiguous makes at most twice the allocator calls of the others: the
// eviction counts the longest free run victim by victim instead of
// retrying the batch after each victim, as it did when contiguous made 5
// to 12 times the calls.
func TestMixedLayouts(t *testing.T) {
	sc := load(t, "5-mixed-layouts.scn")
	if len(sc.Layouts) != 2 {
		t.Fatalf("%d layouts, want 2", len(sc.Layouts))
	}
	var pols []sim.Policy
	for _, p := range Policies() {
		if p.Prefix == sim.PrefixOnePass {
			pols = append(pols, p)
		}
	}
	rs := runPolicies(t, sc, pols, Options{MaxTraffic: mixedCut, Fill: FillNone})
	get := func(pl allocator.Placement, c sim.Control) *Result { return rs[policy(sim.PrefixOnePass, pl, c)] }
	c := get(allocator.Contiguous, sim.Periodic)
	for _, pl := range []allocator.Placement{allocator.Scattered, allocator.ContiguousFirst} {
		o := get(pl, sim.Periodic)
		if !(c.FailedCalls > o.FailedCalls && c.FailedWithFree > o.FailedWithFree) {
			t.Errorf("periodic: contiguous failed %d (%d with free bytes), %s %d (%d); want contiguous worse",
				c.FailedCalls, c.FailedWithFree, pl, o.FailedCalls, o.FailedWithFree)
		}
		if c.FailedWithFree*10 < c.FailedCalls*9 {
			t.Errorf("periodic contiguous: %d of %d failures with free bytes, want nearly all", c.FailedWithFree, c.FailedCalls)
		}
	}
	cd := get(allocator.Contiguous, sim.OnDemand)
	for _, pl := range []allocator.Placement{allocator.Contiguous, allocator.Scattered, allocator.ContiguousFirst} {
		o := get(pl, sim.OnDemand)
		if o.FailedCalls != 0 {
			t.Errorf("on-demand %s: %d failed calls, want 0", pl, o.FailedCalls)
		}
		if pl != allocator.Contiguous && cd.AllocCalls > 2*o.AllocCalls {
			t.Errorf("on-demand: contiguous made %d allocator calls, %s %d; want ≤ 2×", cd.AllocCalls, pl, o.AllocCalls)
		}
	}
}

// TestAllScenariosParse keeps every file in testdata/scenarios parsing,
// with unique names and an outcome.
func TestAllScenariosParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.scn"))
	if err != nil || len(files) < 5 {
		t.Fatalf("%d scenario files (%v), want at least 5", len(files), err)
	}
	names := map[string]bool{}
	var mu sync.Mutex
	for _, f := range files {
		sc, err := ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if names[sc.Name] {
			t.Errorf("%s: duplicate scenario name %q", f, sc.Name)
		}
		names[sc.Name] = true
		mu.Unlock()
		if len(sc.Outcome) == 0 {
			t.Errorf("%s: no outcome line", f)
		}
	}
	for _, want := range []string{"seed-restore", "tail-first-eviction", "oom-below-watermark", "sustained-burst", "mixed-layouts"} {
		if !names[want] {
			t.Errorf("scenario %s missing", want)
		}
	}
}
