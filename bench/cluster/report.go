//go:build linux

package cluster

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// mtok writes a token count in millions ("102.95M").
func mtok(n int64) string { return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + "M" }

// qName writes an L2 size as a multiple of a node's l1 and in blocks.
func qName(c *Cell) string {
	return strconv.FormatFloat(c.Q, 'g', -1, 64) + "× (" + strconv.FormatInt(c.L2, 10) + ")"
}

// HitTable is the hit rates and prefill tokens: isolated nodes, nodes
// with L2 under each write policy, the ideal bound, and the best policy's
// distance to the bound and gain over isolated nodes.
func (r *Report) HitTable() *sim.Table {
	t := &sim.Table{Columns: []string{"nodes", "routing", "Q", "isolated: hit", "prefill"}}
	for _, w := range r.Plan.Writes {
		t.Columns = append(t.Columns, "+L2 "+w.String()+": hit", "prefill")
	}
	t.Columns = append(t.Columns, "ideal: hit", "prefill", "best", "best − ideal", "best − isolated")
	for _, c := range r.Cells {
		row := []string{strconv.Itoa(c.Nodes), c.Routing.Name, qName(c), sim.Percent(c.Isolated.HitRate(), 2), mtok(c.Isolated.PrefillTokens())}
		for _, x := range c.Tiered {
			row = append(row, sim.Percent(x.HitRate(), 2), mtok(x.PrefillTokens()))
		}
		b := c.Tiered[c.Best()]
		row = append(row, sim.Percent(c.Ideal.HitRate(), 2), mtok(c.Ideal.Tokens-c.Ideal.HitTokens),
			b.Config.Write.String(), sim.PercentPoints(b.HitRate()-c.Ideal.HitRate(), 2), sim.PercentPoints(b.HitRate()-c.Isolated.HitRate(), 2))
		t.Rows = append(t.Rows, row)
	}
	return t
}

// TrafficTable is what each write policy moves through L2: the share of
// the hits that came from L2, and the blocks and bytes put to L2 and read
// from it per hit (all hits, l1's and L2's).
func (r *Report) TrafficTable() *sim.Table {
	t := &sim.Table{Columns: []string{"nodes", "routing", "Q", "policy", "L2 share of hits", "blocks to L2 / hit", "from L2 / hit", "bytes to L2 / hit", "bytes from L2 / hit", "puts / L2 hit", "L2 evictions", "distinct held ÷ places"}}
	for _, c := range r.Cells {
		for _, x := range c.Tiered {
			t.Rows = append(t.Rows, []string{strconv.Itoa(c.Nodes), c.Routing.Name, qName(c), x.Config.Write.String(),
				sim.Percent(ratio(x.L2Hits, x.Hits), 1),
				strconv.FormatFloat(x.PerHit(x.Puts), 'f', 3, 64), strconv.FormatFloat(x.PerHit(x.L2Hits), 'f', 3, 64),
				bytesStr(x.PerHit(x.BytesToL2())), bytesStr(x.PerHit(x.BytesFromL2())),
				strconv.FormatFloat(ratio(x.Puts, x.L2Hits), 'f', 1, 64), strconv.FormatInt(x.L2Evictions, 10), sim.Percent(ratio(x.Held, x.Places), 1)})
		}
	}
	return t
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// bytesStr writes a byte count in KiB or MiB with one decimal.
func bytesStr(b float64) string {
	switch {
	case b >= 1<<20:
		return strconv.FormatFloat(b/(1<<20), 'f', 1, 64) + " MiB"
	default:
		return strconv.FormatFloat(b/(1<<10), 'f', 1, 64) + " KiB"
	}
}

// Verdict sums up sweeps of several traces: the write policy that shares
// best, and for each trace the best policy's mean distance to the ideal
// bound and mean gain over isolated nodes.
type Verdict struct {
	// Recommend is the policy with the highest mean block hit rate over
	// every cell of every trace; Mean[w] is that mean for Plan.Writes[w].
	Recommend WritePolicy
	Mean      []float64
	// PerTrace is, per report: the recommended policy's mean and worst
	// distance to the ideal bound, its mean gain over isolated nodes, and
	// the cells within Tolerance of the bound.
	PerTrace []TraceVerdict
}

// TraceVerdict is one trace's line of a Verdict.
type TraceVerdict struct {
	Trace                       string
	MeanGap, WorstGap, MeanGain float64
	Within, Cells               int
	GainByRouting               map[string]float64
}

// TargetGap is the target: nodes plus L2 within 1 pp of the ideal
// bound's block hit rate.
const TargetGap = 0.01

// Judge returns the Verdict of reps, which must share their Plan.Writes.
func Judge(reps []*Report) Verdict {
	var v Verdict
	if len(reps) == 0 {
		return v
	}
	writes := reps[0].Plan.Writes
	v.Mean = make([]float64, len(writes))
	n := 0
	for _, r := range reps {
		for _, c := range r.Cells {
			for w, x := range c.Tiered {
				v.Mean[w] += x.HitRate()
			}
			n++
		}
	}
	best := 0
	for w := range v.Mean {
		v.Mean[w] /= float64(max(n, 1))
		if v.Mean[w] > v.Mean[best] {
			best = w
		}
	}
	v.Recommend = writes[best]
	for _, r := range reps {
		tv := TraceVerdict{Trace: r.Trace.Name, Cells: len(r.Cells), WorstGap: 0, GainByRouting: map[string]float64{}}
		per := map[string]int{}
		for _, c := range r.Cells {
			x := c.Tiered[best]
			gap := c.Ideal.HitRate() - x.HitRate()
			tv.MeanGap += gap
			tv.WorstGap = max(tv.WorstGap, gap)
			if gap <= TargetGap {
				tv.Within++
			}
			g := x.HitRate() - c.Isolated.HitRate()
			tv.MeanGain += g
			tv.GainByRouting[c.Routing.Name] += g
			per[c.Routing.Name]++
		}
		tv.MeanGap /= float64(max(len(r.Cells), 1))
		tv.MeanGain /= float64(max(len(r.Cells), 1))
		for k, m := range per {
			tv.GainByRouting[k] /= float64(m)
		}
		v.PerTrace = append(v.PerTrace, tv)
	}
	return v
}

// Write writes each report's tables, then the verdict, as text or
// markdown.
func Write(w io.Writer, reps []*Report, markdown bool) error {
	emit := func(t *sim.Table) error {
		if markdown {
			return t.WriteMarkdown(w)
		}
		return t.WriteText(w)
	}
	for _, r := range reps {
		fmt.Fprintf(w, "== %s: %d requests, %d block references, %d distinct blocks; a node's l1 is %d blocks (%.3g of them), blocks of %s\n\n",
			r.Trace.Name, len(r.Trace.Requests), r.Trace.Refs, r.Trace.Distinct, r.L1, r.Plan.L1Share, sim.FormatSize(r.blockBytes()))
		fmt.Fprintln(w, "Block hit rate and prefill tokens (the tokens that missed):")
		fmt.Fprintln(w)
		if err := emit(r.HitTable()); err != nil {
			return err
		}
		fmt.Fprintln(w, "What L2 moves, per hit (l1's and L2's):")
		fmt.Fprintln(w)
		if err := emit(r.TrafficTable()); err != nil {
			return err
		}
	}
	v := Judge(reps)
	fmt.Fprintf(w, "Mean block hit rate over every cell of every trace:")
	for i, m := range v.Mean {
		fmt.Fprintf(w, " %s %s", reps[0].Plan.Writes[i], sim.Percent(m, 2))
		if i < len(v.Mean)-1 {
			fmt.Fprint(w, ",")
		}
	}
	fmt.Fprintf(w, ". Recommended default: %s.\n", v.Recommend)
	for _, tv := range v.PerTrace {
		fmt.Fprintf(w, "%s under %s: %d of %d cells within %s of the ideal bound (mean gap %s, worst %s); gain over isolated nodes %s on average",
			tv.Trace, v.Recommend, tv.Within, tv.Cells, sim.PercentPoints(TargetGap, 0), sim.PercentPoints(tv.MeanGap, 2), sim.PercentPoints(tv.WorstGap, 2), sim.PercentPoints(tv.MeanGain, 2))
		for _, rt := range reps[0].Plan.Routings {
			if g, ok := tv.GainByRouting[rt.Name]; ok {
				fmt.Fprintf(w, ", %s %s", rt.Name, sim.PercentPoints(g, 2))
			}
		}
		fmt.Fprintln(w, ".")
	}
	fmt.Fprintln(w)
	return nil
}

func (r *Report) blockBytes() int64 {
	if r.Plan.Options.BlockSize > 0 {
		return r.Plan.Options.BlockSize
	}
	return DefaultBlockSize
}

// EvictTable puts policy w's block hit rate under exact LRU in L2 (the
// cells of exact) beside the same cells under Redis's allkeys-lru (the
// cells of redis, a sweep of the same plan with L2Evict RedisLRU).
func EvictTable(exact, redis *Report, w WritePolicy) *sim.Table {
	t := &sim.Table{Columns: []string{"nodes", "routing", "Q", w.String() + ": exact LRU", "Redis allkeys-lru", "Δ"}}
	wi := -1
	for i, x := range exact.Plan.Writes {
		if x == w {
			wi = i
		}
	}
	if wi < 0 || len(exact.Cells) != len(redis.Cells) {
		return t
	}
	for i, c := range exact.Cells {
		a, b := c.Tiered[wi].HitRate(), redis.Cells[i].Tiered[wi].HitRate()
		t.Rows = append(t.Rows, []string{strconv.Itoa(c.Nodes), c.Routing.Name, qName(c), sim.Percent(a, 2), sim.Percent(b, 2), sim.PercentPoints(b-a, 2)})
	}
	return t
}

// DaemonRow is one configuration replayed by the model and by daemons.
type DaemonRow struct {
	// Model is the model's replay of the configuration; Low, for a
	// configuration with L2, the model with random eviction in L2 (the
	// band's low end, AgreeBand).
	Model, Low, Daemons *Result
	// Err is the daemons' replay's error (Daemons is then nil).
	Err  error
	Wall float64 // seconds of the daemons' replay
}

// DaemonTable puts the daemons' block hit rates beside the model's.
func DaemonTable(rows []DaemonRow, tol float64) *sim.Table {
	t := &sim.Table{Columns: []string{"trace", "configuration", "model: hit", "model, random L2", "daemons: hit", "Δ", "agrees", "L2 hits", "Redis holds", "hits' bytes checked", "wall"}}
	for _, r := range rows {
		if r.Err != nil || r.Daemons == nil {
			msg := "no result"
			if r.Err != nil {
				msg = r.Err.Error()
				if i := strings.LastIndex(msg, ": cluster: "); i >= 0 {
					msg = msg[i+2:]
				}
			}
			t.Rows = append(t.Rows, []string{r.Model.Trace, r.Model.Config.Name(), sim.Percent(r.Model.HitRate(), 2), "", "FAILED", msg, "NO", "", "", "", strconv.FormatFloat(r.Wall, 'f', 1, 64) + " s"})
			continue
		}
		d := r.Daemons.HitRate() - r.Model.HitRate()
		ok, low, held := "yes", "–", "–"
		if r.Agree(tol) != nil {
			ok = "NO"
		}
		if r.Low != nil {
			low, held = sim.Percent(r.Low.HitRate(), 2), strconv.FormatInt(r.Daemons.L2Keys, 10)+" of "+strconv.FormatInt(r.Model.Config.L2, 10)
		}
		t.Rows = append(t.Rows, []string{r.Model.Trace, r.Model.Config.Name(), sim.Percent(r.Model.HitRate(), 2), low, sim.Percent(r.Daemons.HitRate(), 2),
			sim.PercentPoints(d, 2), ok, strconv.FormatInt(r.Daemons.L2Hits, 10), held, bytesStr(float64(r.Daemons.Hits * r.Daemons.BlockBytes)), strconv.FormatFloat(r.Wall, 'f', 1, 64) + " s"})
	}
	return t
}

// Agree checks r: a failed replay is its error; a configuration with L2
// must lie in the model's band (AgreeBand, BandTolerance); one without,
// within tol of the model (AgreeResult).
func (r *DaemonRow) Agree(tol float64) error {
	switch {
	case r.Err != nil:
		return r.Err
	case r.Daemons == nil:
		return fmt.Errorf("%w: %s: no result", ErrDisagree, r.Model.Config.Name())
	case r.Low != nil:
		return AgreeBand(r.Low, r.Model, r.Daemons, BandTolerance)
	}
	return AgreeResult(r.Model, r.Daemons, tol)
}
