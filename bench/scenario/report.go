package scenario

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// Columns are the report's column headings, in order; Row formats a
// Result to match.
var Columns = []string{
	"policy", "requested", "granted", "grant/oracle", "read hits", "read hit rate", "OOM keys", "failed calls",
	"failed w/ free", "alloc calls", "probes", "evictions", "peak frag", "mean frag", "wall",
}

// Row formats r as the cells of one report row, under Columns.
func Row(r *Result) []string {
	return []string{
		r.Policy.Name,
		strconv.FormatInt(r.Requested, 10),
		strconv.FormatInt(r.Granted, 10),
		pct(r.GrantRatio()),
		strconv.FormatInt(r.ReadHits, 10),
		readHitRate(r),
		strconv.FormatInt(r.OOMKeys, 10),
		strconv.FormatInt(r.FailedCalls, 10),
		strconv.FormatInt(r.FailedWithFree, 10),
		strconv.FormatUint(r.AllocCalls, 10),
		strconv.FormatUint(r.Probes, 10),
		strconv.FormatUint(r.Evictions, 10),
		pct(r.PeakFrag),
		pct(r.MeanFrag),
		wall(r.Wall),
	}
}

// readHitRate is the read hit rate, or "–" when the scenario reads nothing.
func readHitRate(r *Result) string {
	if r.Reads == 0 {
		return "–"
	}
	return pct(r.ReadHitRate())
}

func pct(f float64) string { return sim.Percent(f, 1) }

func wall(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Microsecond), 'f', 0, 64) + "µs"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
}

// byScenario groups results by scenario, in the order of scs.
func byScenario(scs []*Scenario, results []*Result) [][]*Result {
	out := make([][]*Result, len(scs))
	for _, r := range results {
		for i, sc := range scs {
			if sc.Name == r.Scenario {
				out[i] = append(out[i], r)
				break
			}
		}
	}
	return out
}

// summary says what one scenario is, for the report's heading.
func summary(sc *Scenario) string {
	var layouts []string
	for i, l := range sc.Layouts {
		layouts = append(layouts, fmt.Sprintf("%s %s (%d fit)", l.Name, sim.FormatSize(l.Size), sc.Slots(i)))
	}
	return fmt.Sprintf("pool %s; layouts %s", sim.FormatSize(sc.Pool), strings.Join(layouts, ", "))
}

// table returns the results' rows under Columns.
func table(rs []*Result) *sim.Table {
	t := &sim.Table{Columns: Columns}
	for _, r := range rs {
		t.Rows = append(t.Rows, Row(r))
	}
	return t
}

// WriteText writes one aligned text table per scenario, each under the
// scenario's name, summary and outcome lines.
func WriteText(w io.Writer, scs []*Scenario, results []*Result) error {
	for i, rs := range byScenario(scs, results) {
		if len(rs) == 0 {
			continue
		}
		sc := scs[i]
		fmt.Fprintf(w, "== %s: %s, %s simulated per policy\n", sc.Name, summary(sc), rs[0].Sim)
		for _, o := range sc.Outcome {
			fmt.Fprintf(w, "   %s\n", o)
		}
		if err := table(rs).WriteText(w); err != nil {
			return err
		}
	}
	return nil
}

// WriteMarkdown writes the same tables as markdown: a level-3 heading per
// scenario, its summary and outcome, then the table. preamble, if not
// empty, is written first, followed by a blank line.
func WriteMarkdown(w io.Writer, scs []*Scenario, results []*Result, preamble string) error {
	if err := sim.WritePreamble(w, preamble); err != nil {
		return err
	}
	for i, rs := range byScenario(scs, results) {
		if len(rs) == 0 {
			continue
		}
		sc := scs[i]
		src := sc.Name
		if sc.File != "" {
			src = fmt.Sprintf("`%s`", sc.File)
		}
		fmt.Fprintf(w, "### %s\n\n%s: %s, %s simulated per policy.\n\n", sc.Name, src, summary(sc), rs[0].Sim)
		for _, o := range sc.Outcome {
			fmt.Fprintf(w, "> %s\n", o)
		}
		if len(sc.Outcome) > 0 {
			fmt.Fprintln(w)
		}
		if err := table(rs).WriteMarkdown(w); err != nil {
			return err
		}
	}
	return nil
}
