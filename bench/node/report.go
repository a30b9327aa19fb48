//go:build linux

package node

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

func pct(f float64) string { return sim.Percent(f, 2) }

func pp(f float64) string { return sim.PercentPoints(f, 2) }

// mtok writes a token count in millions.
func mtok(n int64) string { return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + "M" }

// bytesOf writes a byte count in GiB or TiB, two decimals.
func bytesOf(b float64) string {
	if b >= 1<<40 {
		return strconv.FormatFloat(b/(1<<40), 'f', 2, 64) + " TiB"
	}
	return strconv.FormatFloat(b/(1<<30), 'f', 2, 64) + " GiB"
}

// poolCell describes a pool of slots blocks: the fraction, the blocks and
// the bytes.
func poolCell(f float64, slots int64) string {
	return fmt.Sprintf("%s (%d blocks, %s)", strconv.FormatFloat(f, 'g', -1, 64), slots, bytesOf(float64(slots*BlockBytes)))
}

// saved returns how much of b's prefill a avoids, as "−x.xxM (y.y %)".
func saved(a, b *Result) string {
	d := b.PrefillTokens() - a.PrefillTokens()
	return fmt.Sprintf("%s (%s)", mtok(d), sim.Percent(float64(d)/float64(max(b.PrefillTokens(), 1)), 1))
}

// imbalance is the busiest engine's requests over the mean.
func imbalance(r *Result) float64 {
	total, most := 0, 0
	for _, n := range r.Load {
		total += n
		most = max(most, n)
	}
	if total == 0 {
		return 0
	}
	return float64(most) * float64(len(r.Load)) / float64(total)
}

// TPTable is TP's table: per pool size, the shared pool against 8 private
// pools of P/8 (equal memory) for hits, and against 8 replicated pools of
// P (the same data) for bytes: the means of the used bytes and of the
// distinct blocks held, and the ratio of the bytes.
func (rep *Report) TPTable() *sim.Table {
	t := &sim.Table{Columns: []string{"pool P", "shared: block hit", "token hit", "8 private of P/8: block hit", "token hit",
		"gain", "prefill saved", "shared: host bytes", "blocks held", "8 private of P: host bytes", "blocks held", "bytes ÷ private"}}
	for _, pt := range rep.Points {
		s, p, r := pt.TP[Shared], pt.TP[Private], pt.TP[Replicated]
		if s == nil || p == nil {
			continue
		}
		row := []string{poolCell(pt.Fraction, pt.Slots), pct(s.HitRate()), pct(s.TokenHitRate()), pct(p.HitRate()), pct(p.TokenHitRate()),
			pp(s.HitRate() - p.HitRate()), saved(s, p), bytesOf(s.Used.Mean), blocks(s.Unique.Mean), "–", "–", "–"}
		if r != nil {
			row[9], row[10] = bytesOf(r.Used.Mean), blocks(r.Unique.Mean)
			row[11] = strconv.FormatFloat(s.Used.Mean/r.Used.Mean, 'f', 4, 64)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func blocks(f float64) string { return strconv.FormatFloat(f, 'f', 0, 64) }

// DPTable is DP's table under policy index pi: per pool size and
// routing, one shared pool of P against 8 private pools of P/8.
func (rep *Report) DPTable(pi int) *sim.Table {
	t := &sim.Table{Columns: []string{"pool P", "routing", "shared: block hit", "token hit", "prefill tokens",
		"8 private of P/8: block hit", "token hit", "prefill tokens", "gain", "prefill saved", "load max ÷ mean"}}
	for _, pt := range rep.points(pi) {
		for ri, rt := range Routings {
			s, p := pt.DP[Shared][ri], pt.DP[Private][ri]
			if s == nil || p == nil {
				continue
			}
			t.Rows = append(t.Rows, []string{poolCell(pt.Fraction, pt.Slots), rt.Name,
				pct(s.HitRate()), pct(s.TokenHitRate()), mtok(s.PrefillTokens()),
				pct(p.HitRate()), pct(p.TokenHitRate()), mtok(p.PrefillTokens()),
				pp(s.HitRate() - p.HitRate()), saved(s, p), strconv.FormatFloat(imbalance(s), 'f', 3, 64)})
		}
	}
	return t
}

// CostTable is the wall time per block reference in the cache's calls:
// in process, and through the daemon's socket for the shared pools (the
// machine's load is in these numbers; the ratio is what to read).
func (rep *Report) CostTable() *sim.Table {
	t := &sim.Table{Columns: []string{"pool P", "policy", "in process ns/block ref", "DP shared (1 client a request)", "÷ in process",
		"TP shared (8 ranks a request)", "÷ in process"}}
	for _, pt := range rep.Points {
		base := pt.Single.NsPerBlockOp()
		row := []string{strconv.FormatFloat(pt.Fraction, 'g', -1, 64), pt.Policy.Name, strconv.FormatFloat(base, 'f', 0, 64), "–", "–", "–", "–"}
		if s := pt.DP[Shared][0]; s != nil {
			row[3], row[4] = strconv.FormatFloat(s.NsPerBlockOp(), 'f', 0, 64), times(s.NsPerBlockOp()/base)
		}
		if s := pt.TP[Shared]; s != nil {
			row[5], row[6] = strconv.FormatFloat(s.NsPerBlockOp(), 'f', 0, 64), times(s.NsPerBlockOp()/base)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func times(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "×" }

// points returns the points of policy index pi, smallest pool first.
func (rep *Report) points(pi int) []*Point {
	var out []*Point
	for _, pt := range rep.Points {
		if pt.Policy.Name == rep.Plan.Policies[pi].Name {
			out = append(out, pt)
		}
	}
	slices.SortStableFunc(out, func(a, b *Point) int { return cmp.Compare(a.Slots, b.Slots) })
	return out
}

// Recommendation is the configuration the report recommends to a serving
// engine on a node, and the numbers behind it.
type Recommendation struct {
	// Point is the pool size and policy: the policy whose shared pool
	// hits the most blocks on average over the pool sizes (the first of
	// the plan's on a tie), at the smallest pool whose shared hit rate is
	// within 1 pp of that policy's largest pool's.
	Point *Point
	// Routing is the DP routing recommended, an index of Routings.
	Routing int
	// TP is the point of the same pool size that ran TP, or nil.
	TP *Point
}

// Recommend picks the configuration; nil when DP did not run.
func (rep *Report) Recommend() *Recommendation {
	var pick []*Point
	bestMean := -1.0
	for pi := range rep.Plan.Policies {
		pts := rep.points(pi)
		if len(pts) == 0 || pts[0].DP[Shared][0] == nil {
			continue
		}
		mean := 0.0
		for _, pt := range pts {
			mean += pt.DP[Shared][0].HitRate() / float64(len(pts))
		}
		if mean > bestMean {
			pick, bestMean = pts, mean
		}
	}
	if pick == nil {
		return nil
	}
	top := pick[len(pick)-1].DP[Shared][0].HitRate()
	rec := &Recommendation{Point: pick[len(pick)-1]}
	for _, pt := range pick {
		if pt.DP[Shared][0].HitRate() >= top-0.01 {
			rec.Point = pt
			break
		}
	}
	// A shared pool's hits do not depend on the routing; routing by
	// conversation is the one that keeps them if the pool is ever split
	// (the private rows), so it wins unless it unbalances the engines by
	// more than a tenth.
	rec.Routing = 1
	if imbalance(rec.Point.DP[Shared][1]) > 1.1 {
		rec.Routing = 0
	}
	for _, pt := range rep.Points {
		if pt.Slots == rec.Point.Slots && pt.TP[Shared] != nil && pt.TP[Private] != nil {
			rec.TP = pt
		}
	}
	return rec
}

// Text writes the recommendation as a paragraph of markdown.
func (rec *Recommendation) Text(rep *Report) string {
	pt := rec.Point
	s := pt.DP[Shared][rec.Routing]
	var b strings.Builder
	fmt.Fprintf(&b, "**Recommended: one shared kvallocd pool per node of P = %s of the working set (%d blocks, %s of %s KV), "+
		"policy %s, requests routed %s.** ",
		strconv.FormatFloat(pt.Fraction, 'g', -1, 64), pt.Slots, bytesOf(float64(pt.Slots*BlockBytes)), Model, pt.Policy.Name, Routings[rec.Routing].Phrase)
	fmt.Fprintf(&b, "The shared pool hits %s of the blocks and %s of the tokens, under either routing, exactly what one engine in process gets with the whole pool (%s); ",
		pct(s.HitRate()), pct(s.TokenHitRate()), pct(pt.Single.HitRate()))
	for ri, rt := range Routings {
		p := pt.DP[Private][ri]
		fmt.Fprintf(&b, "8 private pools of P/8 routed %s hit %s (%s; the shared pool saves %s of their prefill tokens)", rt.Phrase, pct(p.HitRate()),
			pp(pt.DP[Shared][ri].HitRate()-p.HitRate()), saved(pt.DP[Shared][ri], p))
		if ri == 0 {
			b.WriteString("; ")
		}
	}
	b.WriteString(". ")
	pick := rep.points(slices.IndexFunc(rep.Plan.Policies, func(p sim.Policy) bool { return p.Name == pt.Policy.Name }))
	if larger := pick[len(pick)-1]; larger.Slots > pt.Slots {
		fmt.Fprintf(&b, "A pool %s the size (%s) adds only %s. ",
			strconv.FormatFloat(float64(larger.Slots)/float64(pt.Slots), 'f', 1, 64)+"×", bytesOf(float64(larger.Slots*BlockBytes)),
			pp(larger.DP[Shared][0].HitRate()-s.HitRate()))
	}
	if smaller := pick[0]; smaller.Slots < pt.Slots {
		fmt.Fprintf(&b, "A pool of %s (%s) loses %s. ", strconv.FormatFloat(smaller.Fraction, 'g', -1, 64), bytesOf(float64(smaller.Slots*BlockBytes)),
			pp(s.HitRate()-smaller.DP[Shared][0].HitRate()))
	}
	var others []string
	for pi, p := range rep.Plan.Policies {
		if p.Name == pt.Policy.Name {
			continue
		}
		for _, q := range rep.points(pi) {
			if q.Slots == pt.Slots && q.DP[Shared][0] != nil {
				others = append(others, fmt.Sprintf("%s %s", p.Name, pp(q.DP[Shared][0].HitRate()-s.HitRate())))
			}
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "Other policies at this pool: %s (and on average over the pool sizes they hit less). ", strings.Join(others, ", "))
	}
	fmt.Fprintf(&b, "Routing by conversation unbalances the engines by %s (busiest ÷ mean requests; round-robin %s) and changes no host hit with a shared pool, "+
		"but with split pools it is worth %s over round-robin, so it is the routing that does not depend on the pool being shared. ",
		strconv.FormatFloat(imbalance(pt.DP[Shared][1]), 'f', 3, 64), strconv.FormatFloat(imbalance(pt.DP[Shared][0]), 'f', 3, 64),
		pp(pt.DP[Private][1].HitRate()-pt.DP[Private][0].HitRate()))
	if rec.TP != nil {
		t := rec.TP.TP
		fmt.Fprintf(&b, "For TP of an MLA model (under %s) the same pool holds the 8 ranks' KV once: ", rec.TP.Policy.Name)
		if t[Replicated] != nil {
			fmt.Fprintf(&b, "%s ÷ %s = %s of the bytes of 8 private pools holding the same data (%s and %s distinct blocks on average), and ",
				bytesOf(t[Shared].Used.Mean), bytesOf(t[Replicated].Used.Mean), strconv.FormatFloat(t[Shared].Used.Mean/t[Replicated].Used.Mean, 'f', 4, 64),
				blocks(t[Shared].Unique.Mean), blocks(t[Replicated].Unique.Mean))
		}
		fmt.Fprintf(&b, "at equal memory it hits %s against %s for 8 private pools of P/8 (%s).", pct(t[Shared].HitRate()), pct(t[Private].HitRate()),
			pp(t[Shared].HitRate()-t[Private].HitRate()))
	}
	return strings.TrimSpace(b.String())
}

// Heading describes the replay: trace, requests, blocks, model, policy.
func (rep *Report) Heading() string {
	tr := rep.Trace
	n, refs := len(tr.Requests), tr.Refs
	if m := rep.Plan.Options.MaxRequests; m > 0 && m < n {
		n, refs = m, 0
		for _, r := range tr.Requests[:m] {
			refs += int64(len(r.Blocks))
		}
	}
	return fmt.Sprintf("%s: %d requests, %d block references, %d distinct blocks; %d conversations (%d with more than one turn)",
		filepath.Base(tr.Name), n, refs, tr.Distinct, rep.Sessions, rep.MultiTurn)
}

// Preamble is the markdown report's introduction: what ran and how.
func (rep *Report) Preamble() string {
	return fmt.Sprintf(`# The node's gains: one kvallocd pool per node against a pool per engine

%s.

Every run goes through real daemons (package server, the socket server of kvallocd, started in process) and 8 Go clients (package client), one per engine or rank, driven from one goroutine in the trace's order, so every number but the times is deterministic. Blocks are %d tokens of %s KV (MLA, 61 layers × (512 + 64) values × 2 bytes × 512 tokens = %d bytes, 34.31 MiB); the pools are memfds written only at a %d-byte stamp at the end of each object, which every hit checks. The request model, the clock and the prefill time are bench/trace's (a request's hits are the longest resident prefix at its arrival; its blocks become readable when its prefill ends, at %v tokens/s).

- **DP**: 8 engines, each request routed to one, round-robin or by conversation (session affinity: the trace has no session id, so a request continues the conversation of the earlier request whose prompt but its last block is the longest prefix of its own, at least %d blocks; see node.Sessions for the rule and its limits). One shared pool of P against 8 private pools of P/8.
- **TP**: one engine of 8 ranks of an MLA model, whose KV is the same on every rank: every rank looks up every request and stores its missing blocks; in a shared pool the first rank to reserve a block writes it and the others find it (KEY_NOT_WRITABLE in ModeNew). One shared pool of P against 8 private pools of P/8 (equal memory, for hits) and against 8 private pools of P (the same data, for bytes).
- P is a fraction of the trace's distinct blocks, as bench/trace defines it; a shared pool's hits must equal bench/trace's in-process single engine of P under the same policy, and Sweep fails otherwise.
`, rep.Heading(), BlockTokens, Model, BlockBytes, StampBytes, prefillRate(rep.Plan.Options), MinShared)
}

func prefillRate(o trace.Options) float64 {
	if o.PrefillRate > 0 {
		return o.PrefillRate
	}
	return trace.DefaultPrefillRate
}

// sections returns the report's tables, each with its heading.
func (rep *Report) sections() []section {
	var out []section
	if t := rep.TPTable(); len(t.Rows) > 0 {
		out = append(out, section{fmt.Sprintf("TP dedup (MLA, 8 ranks), policy %s", rep.Plan.Policies[0].Name), t})
	}
	for pi, p := range rep.Plan.Policies {
		if t := rep.DPTable(pi); len(t.Rows) > 0 {
			out = append(out, section{fmt.Sprintf("DP sharing (8 engines), policy %s", p.Name), t})
		}
	}
	out = append(out, section{"What the socket costs: wall time per block reference in the cache's calls; the daemon's include writing and checking the stamps (a page fault per new block), the in-process replay writes nothing, and a loaded machine inflates both", rep.CostTable()})
	return out
}

type section struct {
	title string
	t     *sim.Table
}

// WriteText writes the tables as aligned text and the recommendation.
func (rep *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "== %s\n", rep.Heading())
	for _, s := range rep.sections() {
		fmt.Fprintf(w, "== %s\n", s.title)
		if err := s.t.WriteText(w); err != nil {
			return err
		}
	}
	if rec := rep.Recommend(); rec != nil {
		fmt.Fprintf(w, "%s\n\n", strings.ReplaceAll(rec.Text(rep), "**", ""))
	}
	return nil
}

// WriteMarkdown writes the preamble, the tables and the recommendation.
func (rep *Report) WriteMarkdown(w io.Writer) error {
	if err := sim.WritePreamble(w, rep.Preamble()); err != nil {
		return err
	}
	if rec := rep.Recommend(); rec != nil {
		fmt.Fprintf(w, "## Recommendation\n\n%s\n\n", rec.Text(rep))
	}
	for _, s := range rep.sections() {
		fmt.Fprintf(w, "## %s\n\n", s.title)
		if err := s.t.WriteMarkdown(w); err != nil {
			return err
		}
	}
	return nil
}
