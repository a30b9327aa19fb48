//go:build linux

package node

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// fake returns a result of hits of 1000 block references and of tokens
// in proportion, served over engines with the given load.
func fake(hits int64, load ...int) *Result {
	r := &Result{Load: load}
	r.Refs, r.Hits, r.Tokens, r.HitTokens = 1000, hits, 512000, hits*512
	return r
}

// fakeReport has two policies at three pool sizes; policy b is better on
// average though a is better at the middle pool, and the shared pool
// saturates: within 1 pp of the largest from the middle pool on.
func fakeReport() *Report {
	a, b := sim.Policy{Name: "a", Control: sim.OnDemand}, sim.Policy{Name: "b", Control: sim.OnDemand}
	tr := &trace.Trace{Name: "t.jsonl.gz", Distinct: 1000}
	rep := &Report{Trace: tr, Plan: Plan{Fractions: []float64{0.1, 0.25, 0.5}, Policies: []sim.Policy{a, b}}, Sessions: 10, MultiTurn: 4}
	for _, pol := range []sim.Policy{a, b} {
		for i, f := range rep.Plan.Fractions {
			hits := []int64{200, 300, 305}[i]
			if pol.Name == "b" {
				hits = []int64{250, 299, 306}[i]
			}
			single := fake(hits)
			pt := &Point{Fraction: f, Slots: int64(f * 1000), Policy: pol, Single: &single.Result}
			pt.DP[Shared] = [2]*Result{fake(hits, 1, 1), fake(hits, 3, 1)}
			pt.DP[Private] = [2]*Result{fake(hits/3, 1, 1), fake(hits-20, 3, 1)}
			if pol.Name == "a" {
				pt.TP = [3]*Result{fake(hits), fake(hits / 4), fake(hits)}
				pt.TP[Shared].Used, pt.TP[Replicated].Used = Sampled{Mean: 1 << 30}, Sampled{Mean: 8 << 30}
			}
			rep.Points = append(rep.Points, pt)
		}
	}
	return rep
}

// TestRecommend: the best policy on average (b), at the smallest pool
// within 1 pp of its largest (0.25), by conversation unless that
// unbalances the engines by more than a tenth (3 ÷ 2 = 1.5 here does),
// with TP's numbers from the same pool under the first policy.
func TestRecommend(t *testing.T) {
	rep := fakeReport()
	rec := rep.Recommend()
	require.Equal(t, "b", rec.Point.Policy.Name)
	require.Equal(t, 0.25, rec.Point.Fraction)
	require.Equal(t, 0, rec.Routing, "an imbalance of 1.5 picks round-robin")
	require.Equal(t, "a", rec.TP.Policy.Name)
	text := rec.Text(rep)
	require.Contains(t, text, "P = 0.25")
	require.Contains(t, text, "policy b, requests routed round-robin")
	require.Contains(t, text, "0.1250 of the bytes")
	require.Contains(t, text, "Other policies at this pool: a +0.10pp")
	for _, pt := range rep.Points {
		pt.DP[Shared][1].Load = []int{1, 1}
	}
	require.Equal(t, 1, rep.Recommend().Routing)
	rep.Plan.NoDP = true
	for _, pt := range rep.Points {
		pt.DP = [2][2]*Result{}
	}
	require.Nil(t, rep.Recommend())
}

func TestReportWriters(t *testing.T) {
	rep := fakeReport()
	var txt, md bytes.Buffer
	require.NoError(t, rep.WriteText(&txt))
	require.NoError(t, rep.WriteMarkdown(&md))
	for _, s := range []string{"TP dedup", "DP sharing (8 engines), policy a", "DP sharing (8 engines), policy b", "What the socket costs"} {
		require.Contains(t, txt.String(), s)
		require.Contains(t, md.String(), "## "+s)
	}
	require.Contains(t, md.String(), "## Recommendation\n\n**Recommended:")
	require.Contains(t, md.String(), "| 0.25 (250 blocks, 8.38 GiB) | session | 29.90% |")
	dir := t.TempDir()
	require.NoError(t, rep.WritePlotFile(filepath.Join(dir, "p.svg")))
	require.Error(t, (&Report{Trace: rep.Trace, Plan: Plan{Policies: rep.Plan.Policies}}).WritePlotFile(filepath.Join(dir, "q.svg")))
}
