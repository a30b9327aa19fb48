//go:build linux

package server

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestLoadRateEstimate: the first get sets the estimate, later ones move
// it by a quarter of the difference; a get that received nothing is a rate
// of 0; a get timed at 0 counts as a microsecond, not a division by zero.
func TestLoadRateEstimate(t *testing.T) {
	var r loadRate
	now := time.Unix(1000, 0)
	if e := r.estimate(); e.Samples != 0 {
		t.Fatalf("a new estimate is not cold: %+v", e)
	}
	r.observe(1e6, 10*time.Millisecond, now) // 100 MB/s
	if e := r.estimate(); e.Rate != 1e8 || e.Latency != 10*time.Millisecond || e.Samples != 1 {
		t.Fatalf("after one get: %+v", e)
	}
	r.observe(0, 2*time.Second, now) // a timeout: rate 0
	if e := r.estimate(); e.Rate != 0.75e8 || e.Latency != 10*time.Millisecond+time.Duration(0.25*float64(2*time.Second-10*time.Millisecond)) {
		t.Fatalf("after a timed-out get: %+v", e)
	}
	var z loadRate
	z.observe(1<<20, 0, now)
	if e := z.estimate(); e.Rate != float64(1<<20)/1e-6 || math.IsInf(e.Rate, 0) || e.Latency != time.Microsecond {
		t.Fatalf("a get timed at 0: %+v", e)
	}
}

// TestProbeDue: one probe per interval from the last sample or probe.
func TestProbeDue(t *testing.T) {
	var r loadRate
	now := time.Unix(1000, 0)
	r.observe(1, time.Second, now)
	if r.probeDue(now.Add(999*time.Millisecond), time.Second) {
		t.Fatal("a probe before the interval")
	}
	if !r.probeDue(now.Add(time.Second), time.Second) {
		t.Fatal("no probe at the interval")
	}
	if r.probeDue(now.Add(1500*time.Millisecond), time.Second) {
		t.Fatal("a second probe within the interval of the first")
	}
}

// TestJudge: the break-even rule at its edges.
func TestJudge(t *testing.T) {
	mib := int64(1 << 20)
	sizes := []int64{mib, mib, mib, mib, mib} // 5 MiB in batches of 2: 2, 2, 1
	warm := func(rate float64) L2Estimate { return L2Estimate{Rate: rate, Samples: 3} }
	for _, c := range []struct {
		name    string
		e       L2Estimate
		minRate float64
		budget  time.Duration
		want    l2Verdict
	}{
		{"cold counts all, whatever the floor", L2Estimate{}, 1e300, 0, l2Verdict{paid: 5}},
		{"cold counts all, whatever the budget", L2Estimate{}, 0, time.Microsecond, l2Verdict{paid: 5}},
		{"no floor, no budget", warm(0), 0, 0, l2Verdict{paid: 5}},
		{"above the floor", warm(1e9), 0.7e9, 0, l2Verdict{paid: 5}},
		{"at the floor", warm(0.7e9), 0.7e9, 0, l2Verdict{paid: 5}},
		{"below the floor", warm(0.69e9), 0.7e9, 0, l2Verdict{slow: 5}},
		{"a huge floor", warm(1e18), 1e300, 0, l2Verdict{slow: 5}},
		{"rate 0, a floor", warm(0), 1, 0, l2Verdict{slow: 5}},
		{"rate 0, a budget", warm(0), 0, 10 * time.Second, l2Verdict{late: 5}},
		// 1 GiB/s: a MiB takes 0.977 ms; the first batch ends at 1.95 ms,
		// the second at 3.9 ms, the third at 4.9 ms.
		{"budget under the first batch", warm(1 << 30), 0, 1900 * time.Microsecond, l2Verdict{late: 5}},
		{"budget past the first batch", warm(1 << 30), 0, 2 * time.Millisecond, l2Verdict{paid: 2, late: 3}},
		{"budget past the second batch", warm(1 << 30), 0, 4 * time.Millisecond, l2Verdict{paid: 4, late: 1}},
		{"budget past all", warm(1 << 30), 0, 5 * time.Millisecond, l2Verdict{paid: 5}},
		{"a huge rate, the least budget", warm(math.MaxFloat64), 0, time.Microsecond, l2Verdict{paid: 5}},
		{"floor and budget: the floor first", warm(0.5e9), 0.7e9, 10 * time.Second, l2Verdict{slow: 5}},
	} {
		if got := judge(c.e, c.minRate, c.budget, batching{keys: 2}, sizes); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := judge(warm(1), 1e9, 0, batching{keys: 2}, nil); got != (l2Verdict{}) {
		t.Errorf("no hits: %+v", got)
	}
	// Gets of 2 keys and up to 4 MiB: 4, then 1; the first ends at 3.9 ms.
	for budget, want := range map[time.Duration]l2Verdict{
		3800 * time.Microsecond: {late: 5},
		4 * time.Millisecond:    {paid: 4, late: 1},
		5 * time.Millisecond:    {paid: 5},
	} {
		if got := judge(warm(1<<30), 0, budget, batching{keys: 2, bytes: 4 * mib}, sizes); got != want {
			t.Errorf("gets of up to 4 MiB, budget %v: %+v, want %+v", budget, got, want)
		}
	}
}

// TestBatchingEnd: a get carries its keys, and more while their payloads
// fit its bytes, never fewer than its keys (or what is left), and at
// least one key.
func TestBatchingEnd(t *testing.T) {
	const k, m = 64 << 10, 8 << 20
	many := func(n int, size int64) []int64 {
		s := make([]int64, n)
		for i := range s {
			s[i] = size
		}
		return s
	}
	for _, c := range []struct {
		name  string
		b     batching
		sizes []int64
		ends  []int
	}{
		{"8 MiB objects: 8 a get", batching{8, 64 << 20}, many(20, m), []int{8, 16, 20}},
		{"64 KiB objects: 1024 a get", batching{8, 64 << 20}, many(2500, k), []int{1024, 2048, 2500}},
		{"40 MiB objects: the keys, past the bytes", batching{8, 64 << 20}, many(10, 40<<20), []int{8, 10}},
		{"no bytes: the keys alone", batching{2, 0}, many(5, k), []int{2, 4, 5}},
		{"no keys: at least one", batching{0, 0}, many(3, m), []int{1, 2, 3}},
		{"mixed: the bytes end at the large one", batching{1, 3 * m}, []int64{m, m, 2 * m, k, k}, []int{2, 5}},
		{"empty payloads ride along", batching{1, m}, []int64{0, 0, m, 0, k}, []int{4, 5}},
		{"the bytes at their limit", batching{1, 1<<63 - 1}, []int64{1<<62 - 1, 1 << 62, 1}, []int{2, 3}},
	} {
		var ends []int
		for at := 0; at < len(c.sizes); {
			at = c.b.end(c.sizes, at)
			ends = append(ends, at)
		}
		if !slices.Equal(ends, c.ends) {
			t.Errorf("%s: gets end at %v, want %v", c.name, ends, c.ends)
		}
	}
}

// TestL2ConfigRates: a break-even rate must be a finite rate, and a probe
// interval not negative; 0 takes the default.
func TestL2ConfigRates(t *testing.T) {
	for _, r := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := (L2Config{MinRate: r}).withDefaults(); err == nil {
			t.Errorf("MinRate %v accepted", r)
		}
	}
	if _, err := (L2Config{ProbeInterval: -time.Nanosecond}).withDefaults(); err == nil {
		t.Error("a negative ProbeInterval accepted")
	}
	c, err := (L2Config{MinRate: math.MaxFloat64}).withDefaults()
	if err != nil || c.ProbeInterval != DefaultL2ProbeInterval {
		t.Errorf("defaults: %+v, %v", c, err)
	}
}
