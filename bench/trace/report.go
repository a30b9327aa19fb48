package trace

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// Columns are the report's column headings, in order; Row formats one
// result to match.
var Columns = []string{
	"policy", "hit rate", "token hit", "evict prefill", "orphans", "Δ LRU", "Δ Belady",
	"ns/op ÷ LRU", "granted", "OOM keys", "failed calls", "failed w/ free",
	"alloc calls", "evictions", "frag mean", "frag peak", "usage mean", "usage peak", "ns/block op",
}

// Row formats r as the cells of one row of t, under Columns. Cells that do
// not apply (the l1 counters of a bound) are "–".
func (t *Table) Row(r *Result) []string {
	na := "–"
	l1 := r.Kind == KindL1
	cell := func(ok bool, s string) string {
		if ok {
			return s
		}
		return na
	}
	return []string{
		r.Policy,
		pct(r.HitRate()),
		pct(r.TokenHitRate()),
		strconv.FormatInt(r.EvictPrefill, 10),
		strconv.FormatInt(r.Orphans, 10),
		cell(r.Kind != KindLRU, pp(r.HitRate()-t.LRU.HitRate())),
		cell(r.Kind != KindBelady, pp(r.HitRate()-t.Belady.HitRate())),
		cell(r.Kind != KindBelady, times(r.NsPerBlockOp()/t.LRU.NsPerBlockOp())),
		cell(l1, strconv.FormatInt(r.Granted, 10)),
		cell(l1, strconv.FormatInt(r.OOMKeys, 10)),
		cell(l1, strconv.FormatInt(r.FailedCalls, 10)),
		cell(l1, strconv.FormatInt(r.FailedWithFree, 10)),
		cell(l1, strconv.FormatUint(r.AllocCalls, 10)),
		strconv.FormatUint(r.Evictions, 10),
		cell(l1, pct(r.MeanFrag)),
		cell(l1, pct(r.PeakFrag)),
		cell(l1, pct(r.MeanUsage)),
		cell(l1, pct(r.PeakUsage)),
		strconv.FormatFloat(r.NsPerBlockOp(), 'f', 0, 64),
	}
}

// Rows returns the table's results in report order: the policies, then
// the ideal LRU and Belady.
func (t *Table) Rows() []*Result {
	return append(append([]*Result(nil), t.Policies...), t.LRU, t.Belady)
}

// Heading describes the table: trace, pool and its size in blocks and
// bytes.
func (t *Table) Heading() string {
	r := t.LRU
	what := fmt.Sprintf("pool %s", t.Pool)
	if t.Pool.Bytes == 0 {
		what = fmt.Sprintf("pool %s of %d distinct blocks", t.Pool, t.Trace.Distinct)
	}
	return fmt.Sprintf("%s: %s = %d blocks (%s); %d requests, %d block references, %s simulated",
		t.Trace.Name, what, t.Slots, humanSize(r.PoolBytes), r.Requests, r.Refs, r.Sim.Round(time.Second))
}

// humanSize writes a byte count in the largest IEC unit it reaches, with
// two decimals when not whole ("1.12GiB").
func humanSize(b int64) string {
	for _, u := range sim.SizeUnits {
		if b >= u.Mult {
			if b%u.Mult == 0 {
				return strconv.FormatInt(b/u.Mult, 10) + u.Suffix
			}
			return strconv.FormatFloat(float64(b)/float64(u.Mult), 'f', 2, 64) + u.Suffix
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}

func pct(f float64) string { return sim.Percent(f, 2) }

func pp(f float64) string { return sim.PercentPoints(f, 2) }

func times(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) + "×" }

// table returns t's rows under Columns.
func (t *Table) table() *sim.Table {
	st := &sim.Table{Columns: Columns}
	for _, r := range t.Rows() {
		st.Rows = append(st.Rows, t.Row(r))
	}
	return st
}

// WriteText writes one aligned table per pool size.
func WriteText(w io.Writer, tables []*Table) error {
	for _, t := range tables {
		fmt.Fprintf(w, "== %s\n", t.Heading())
		if err := t.table().WriteText(w); err != nil {
			return err
		}
	}
	return nil
}

// WriteMarkdown writes the same tables in markdown, each under a level-3
// heading, after preamble (if any) and a blank line.
func WriteMarkdown(w io.Writer, tables []*Table, preamble string) error {
	if err := sim.WritePreamble(w, preamble); err != nil {
		return err
	}
	for _, t := range tables {
		fmt.Fprintf(w, "### %s\n\n", t.Heading())
		if err := t.table().WriteMarkdown(w); err != nil {
			return err
		}
	}
	return nil
}

// WritePhases writes, per pool size, each row's cache time per block
// reference split by phase of the request model, and the share of each.
func WritePhases(w io.Writer, tables []*Table) error {
	for _, t := range tables {
		fmt.Fprintf(w, "== ns per block reference by phase: %s\n", t.Heading())
		st := &sim.Table{Columns: []string{"policy", "calls/request"}}
		for p := range NumPhases {
			st.Columns = append(st.Columns, p.String())
		}
		st.Columns = append(st.Columns, "total")
		for _, r := range t.Rows() {
			cells := []string{r.Policy, strconv.FormatFloat(float64(r.L1Calls)/float64(max(r.Requests, 1)), 'f', 1, 64)}
			for p := range NumPhases {
				ns := float64(r.Phases[p].Nanoseconds()) / float64(max(r.Refs, 1))
				cells = append(cells, fmt.Sprintf("%.0f (%s)", ns, pct(float64(r.Phases[p])/float64(max(r.Busy, 1)))))
			}
			cells = append(cells, strconv.FormatFloat(r.NsPerBlockOp(), 'f', 0, 64))
			st.Rows = append(st.Rows, cells)
		}
		if err := st.WriteText(w); err != nil {
			return err
		}
	}
	return nil
}
