// Package gate decides whether benchmark results regressed against a
// baseline.
//
// This package is opinionated. It makes no distributional assumption
// about timings: every unit is summarized by its median and two
// samples are compared with the Mann-Whitney U test
// (benchmath.AssumeNothing). A statistically significant difference
// is necessary but not sufficient for a regression: the change must
// also exceed a per-unit threshold, because on a shared machine tiny
// but real shifts (a different code layout, a noisy neighbour) are
// common and not worth failing a build over.
//
// Only three units are gated, all of them "lower is better":
//
//   - sec/op: p < Alpha and the median grew by more than TimeThreshold.
//   - B/op: p < Alpha and the median grew by more than BytesThreshold.
//   - allocs/op: the median grew by at least AllocsMinDelta (default 1,
//     one allocation) and the growth is real: either p < Alpha, or every
//     new sample is above every old sample. Allocation counts are nearly
//     deterministic for a fixed amount of work, but not quite: code that
//     formats an error goes through fmt's sync.Pool, which the garbage
//     collector empties, so a benchmark that allocates on a failure path
//     varies by a few allocations with the number of collections in its
//     run. The minimum delta ignores a median of 5 -> 5.5; the U test
//     ignores a count that wanders over the same range on both sides;
//     the separation rule catches a deterministic 0 -> 1 or 5 -> 6 even
//     with too few runs for a p-value (two per side suffice), and the U
//     test catches it when one run on either side caught a stray
//     allocation and the samples overlap. A negative AllocsMinDelta
//     disables the allocs/op gate.
//
// The allocs/op gate assumes that a benchmark's allocs/op does not depend
// on its iteration count: a benchmark that allocates its scratch in its
// first iteration reports 12 allocs/op at 10 iterations and 5 at 100, and
// a loaded machine, which lowers the count -benchtime 200ms reaches,
// then looks like a regression. kvalloc's benchmarks warm up before
// b.Loop, and bench.TestAllocsPerOpIndependentOfN asserts it.
//
// Every other unit is reported but never gated. A benchmark present on
// only one side is reported and never gated.
//
// Input is the Go benchmark format read with benchfmt, results are
// grouped by full benchmark name (benchproc ".fullname") and split by
// unit. Use at least 10 runs per side: with the U test no difference
// can be significant at 0.05 with fewer than 4 runs per side, and a 95%
// confidence interval of the median needs at least 6.
package gate

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
	"golang.org/x/perf/benchproc"
	"golang.org/x/perf/benchunit"
)

// The gated units, as benchfmt tidies them.
const (
	UnitTime   = "sec/op"
	UnitBytes  = "B/op"
	UnitAllocs = "allocs/op"
)

// Options configures a comparison. Start from DefaultOptions.
type Options struct {
	// Alpha is the significance level of the U test: a difference
	// counts only when p < Alpha.
	Alpha float64

	// Confidence is the confidence level of the interval printed
	// around each median, in (0, 1).
	Confidence float64

	// TimeThreshold is the relative growth of the sec/op median
	// (0.05 is 5%) that a significant change must exceed to be a
	// regression. A negative value disables the sec/op gate.
	TimeThreshold float64

	// BytesThreshold is the same for B/op. A negative value disables
	// the B/op gate.
	BytesThreshold float64

	// AllocsMinDelta is the growth of the allocs/op median, in
	// allocations, that fails the gate when it is real (p < Alpha,
	// or every new sample above every old one). A negative value
	// disables the allocs/op gate.
	AllocsMinDelta float64
}

// DefaultOptions returns the defaults: alpha 0.05, 95% intervals,
// sec/op threshold 5%, B/op threshold 10% and allocs/op growth of one
// allocation.
func DefaultOptions() Options {
	return Options{
		Alpha:          0.05,
		Confidence:     0.95,
		TimeThreshold:  0.05,
		BytesThreshold: 0.10,
		AllocsMinDelta: 1,
	}
}

// Validate reports whether o is usable.
func (o Options) Validate() error {
	switch {
	case !(o.Alpha > 0 && o.Alpha < 1):
		return fmt.Errorf("alpha %v is not in (0, 1)", o.Alpha)
	case !(o.Confidence > 0 && o.Confidence < 1):
		return fmt.Errorf("confidence %v is not in (0, 1)", o.Confidence)
	case math.IsNaN(o.TimeThreshold) || math.IsInf(o.TimeThreshold, 0):
		return fmt.Errorf("time threshold %v is not finite", o.TimeThreshold)
	case math.IsNaN(o.BytesThreshold) || math.IsInf(o.BytesThreshold, 0):
		return fmt.Errorf("bytes threshold %v is not finite", o.BytesThreshold)
	case math.IsNaN(o.AllocsMinDelta) || math.IsInf(o.AllocsMinDelta, 0):
		return fmt.Errorf("allocs delta %v is not finite", o.AllocsMinDelta)
	}
	return nil
}

// An Input is one side of a comparison.
type Input struct {
	// Label names the input in tables and diagnostics.
	Label string

	// R is a stream in the Go benchmark format.
	R io.Reader
}

// A Row is the comparison of one benchmark in one unit.
type Row struct {
	// Name is the full benchmark name without the "Benchmark"
	// prefix, such as "Alloc/size=64".
	Name string

	// Unit is the tidied unit, such as "sec/op".
	Unit string

	// Old and New are the measurements. One of them is nil when the
	// benchmark exists on only one side.
	Old, New *benchmath.Sample

	// OldSummary and NewSummary are the medians and their confidence
	// intervals; only valid when the matching sample is not nil.
	OldSummary, NewSummary benchmath.Summary

	// Comparison is the U test; only valid when both samples exist.
	Comparison benchmath.Comparison

	// Delta is NewSummary.Center/OldSummary.Center - 1: 0 when the
	// medians are equal and +Inf when only the old one is 0.
	Delta float64

	// Significant reports p < Alpha.
	Significant bool

	// Gated reports whether this row can fail the gate.
	Gated bool

	// Regressed reports that this row fails the gate; Reason says why.
	Regressed bool
	Reason    string

	// Warnings are the notes from benchmath worth showing, such as
	// too few samples for an interval. The warning that all values
	// are equal is dropped: it is expected for exact units and the
	// table shows it anyway.
	Warnings []error
}

// A Table holds the rows of one unit.
type Table struct {
	// Unit is the tidied unit of every row.
	Unit string

	// Rows are in the order the benchmarks were first seen.
	Rows []*Row
}

// A Report is the result of Compare.
type Report struct {
	// Options are the options the report was computed with.
	Options Options

	// OldLabel and NewLabel are the labels of the inputs, used as
	// column headers.
	OldLabel, NewLabel string

	// OldResults and NewResults count the benchmark result lines read
	// on each side.
	OldResults, NewResults int

	// Tables holds one table per unit in the order units were first
	// seen.
	Tables []*Table

	// SyntaxErrors are malformed benchmark lines that were skipped.
	SyntaxErrors []error
}

// Compare reads both inputs and compares every benchmark and unit
// they contain.
func Compare(old, cur Input, opt Options) (*Report, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	filter, err := benchproc.NewFilter("*")
	if err != nil {
		return nil, err
	}
	var parser benchproc.ProjectionParser
	proj, unitField, err := parser.ParseWithUnit(".fullname", filter)
	if err != nil {
		return nil, err
	}
	nameField := proj.Fields()[0]

	rep := &Report{Options: opt, OldLabel: old.Label, NewLabel: cur.Label}
	type cell struct{ old, new []float64 }
	cells := make(map[benchproc.Key]*cell)
	var keys []benchproc.Key

	read := func(in Input, isNew bool) (int, error) {
		n := 0
		r := benchfmt.NewReader(in.R, in.Label)
		for r.Scan() {
			switch rec := r.Result().(type) {
			case *benchfmt.SyntaxError:
				rep.SyntaxErrors = append(rep.SyntaxErrors, rec)
			case *benchfmt.Result:
				if ok, _ := filter.Apply(rec); !ok {
					continue
				}
				n++
				for i, k := range proj.ProjectValues(rec) {
					c := cells[k]
					if c == nil {
						c = new(cell)
						cells[k] = c
						keys = append(keys, k)
					}
					v := rec.Values[i].Value
					if isNew {
						c.new = append(c.new, v)
					} else {
						c.old = append(c.old, v)
					}
				}
			}
		}
		if err := r.Err(); err != nil {
			return n, fmt.Errorf("reading %s: %w", in.Label, err)
		}
		return n, nil
	}
	if rep.OldResults, err = read(old, false); err != nil {
		return nil, err
	}
	if rep.NewResults, err = read(cur, true); err != nil {
		return nil, err
	}

	// Group by unit in first-seen order, then order benchmarks with
	// SortKeys (first-seen order of .fullname).
	byUnit := make(map[string][]benchproc.Key)
	var units []string
	for _, k := range keys {
		u := k.Get(unitField)
		if _, ok := byUnit[u]; !ok {
			units = append(units, u)
		}
		byUnit[u] = append(byUnit[u], k)
	}
	thr := &benchmath.Thresholds{CompareAlpha: opt.Alpha}
	for _, u := range units {
		ks := byUnit[u]
		benchproc.SortKeys(ks)
		t := &Table{Unit: u}
		for _, k := range ks {
			c := cells[k]
			t.Rows = append(t.Rows, compareRow(k.Get(nameField), u, c.old, c.new, thr, opt))
		}
		rep.Tables = append(rep.Tables, t)
	}
	return rep, nil
}

func compareRow(name, unit string, oldVals, newVals []float64, thr *benchmath.Thresholds, opt Options) *Row {
	row := &Row{Name: name, Unit: unit}
	a := benchmath.AssumeNothing
	if len(oldVals) > 0 {
		row.Old = benchmath.NewSample(slices.Clone(oldVals), thr)
		row.OldSummary = a.Summary(row.Old, opt.Confidence)
		row.Warnings = append(row.Warnings, row.OldSummary.Warnings...)
	}
	if len(newVals) > 0 {
		row.New = benchmath.NewSample(slices.Clone(newVals), thr)
		row.NewSummary = a.Summary(row.New, opt.Confidence)
		row.Warnings = append(row.Warnings, row.NewSummary.Warnings...)
	}
	if row.Old == nil || row.New == nil {
		side := "old"
		if row.New == nil {
			side = "new"
		}
		row.Warnings = append(row.Warnings, fmt.Errorf("missing in %s", side))
		return row
	}

	row.Comparison = a.Compare(row.Old, row.New)
	if !allEqual(row.Old.Values, row.New.Values) {
		row.Warnings = append(row.Warnings, row.Comparison.Warnings...)
	}
	row.Significant = row.Comparison.P < opt.Alpha
	o, n := row.OldSummary.Center, row.NewSummary.Center
	row.Delta = relDelta(o, n)
	row.Warnings = dedupErrors(row.Warnings)

	significantGrowth := func(threshold float64) {
		row.Gated = threshold >= 0
		if row.Gated && row.Significant && row.Delta > threshold {
			row.Regressed = true
			row.Reason = fmt.Sprintf("%s > %s (p=%.3f < %v)", FormatDelta(row.Delta), FormatDelta(threshold), row.Comparison.P, opt.Alpha)
		}
	}
	switch unit {
	case UnitTime:
		significantGrowth(opt.TimeThreshold)
	case UnitBytes:
		significantGrowth(opt.BytesThreshold)
	case UnitAllocs:
		row.Gated = opt.AllocsMinDelta >= 0
		if !row.Gated || !(n > o && n-o >= opt.AllocsMinDelta) {
			break
		}
		why := ""
		switch {
		case row.Significant:
			why = fmt.Sprintf("p=%.3f < %v", row.Comparison.P, opt.Alpha)
		case slices.Min(row.New.Values) > slices.Max(row.Old.Values):
			why = "every new run above every old run"
		}
		if why != "" {
			row.Regressed = true
			row.Reason = fmt.Sprintf("median %s -> %s, +%s >= %s (%s)", formatFloat(o), formatFloat(n), formatFloat(n-o), formatFloat(opt.AllocsMinDelta), why)
		}
	}
	return row
}

// relDelta is cur/old - 1 without NaN: equal medians give 0 and a zero
// old median gives ±Inf.
func relDelta(old, cur float64) float64 {
	switch {
	case old == cur:
		return 0
	case old == 0:
		return math.Copysign(math.Inf(1), cur)
	}
	return cur/old - 1
}

func allEqual(a, b []float64) bool {
	for _, v := range a {
		if v != a[0] {
			return false
		}
	}
	for _, v := range b {
		if v != a[0] {
			return false
		}
	}
	return true
}

func dedupErrors(errs []error) []error {
	seen := make(map[string]bool)
	out := errs[:0]
	for _, e := range errs {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	return out
}

// FormatDelta formats a relative change such as 0.12 as "+12.00%".
// It never prints NaN: infinities print as "+∞%" and "-∞%".
func FormatDelta(d float64) string {
	switch {
	case math.IsInf(d, 1):
		return "+∞%"
	case math.IsInf(d, -1):
		return "-∞%"
	case math.IsNaN(d):
		return "?"
	case d == 0:
		return "0.00%"
	}
	return fmt.Sprintf("%+.2f%%", 100*d)
}

func formatFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// Regressions returns the rows that fail the gate, table by table.
func (r *Report) Regressions() []*Row {
	var out []*Row
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			if row.Regressed {
				out = append(out, row)
			}
		}
	}
	return out
}

// Select returns a copy of r with only the rows for which keep returns
// true; tables left empty are dropped.
func (r *Report) Select(keep func(*Row) bool) *Report {
	out := *r
	out.Tables = nil
	for _, t := range r.Tables {
		nt := &Table{Unit: t.Unit}
		for _, row := range t.Rows {
			if keep(row) {
				nt.Rows = append(nt.Rows, row)
			}
		}
		if len(nt.Rows) > 0 {
			out.Tables = append(out.Tables, nt)
		}
	}
	return &out
}

// Table returns the table of unit, or nil.
func (r *Report) Table(unit string) *Table {
	for _, t := range r.Tables {
		if t.Unit == unit {
			return t
		}
	}
	return nil
}

// Row returns the row of benchmark name in unit, or nil.
func (r *Report) Row(name, unit string) *Row {
	if t := r.Table(unit); t != nil {
		for _, row := range t.Rows {
			if row.Name == name {
				return row
			}
		}
	}
	return nil
}

// Write prints the report as one benchstat-style table per unit:
//
//	sec/op         old               new               delta
//	Alloc/size=64  1.000µ ± 1%       1.120µ ± 1%       +12.00% (p=0.000 n=10)  REGRESSION: +12.00% > +5.00% (p=0.000 < 0.05)
//
// A cell is the median and the widest deviation of its confidence
// interval from it. The delta is "~" when the difference is not
// significant (and the row did not regress). A geomean row closes
// each table of more than one benchmark; it is never gated. Notes
// follow each table.
func (r *Report) Write(w io.Writer) error {
	for i, t := range r.Tables {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := r.writeTable(w, t); err != nil {
			return err
		}
	}
	for _, e := range r.SyntaxErrors {
		fmt.Fprintf(w, "warning: %v\n", e)
	}
	return nil
}

func (r *Report) writeTable(w io.Writer, t *Table) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	cls := benchunit.ClassOf(t.Unit)
	fmt.Fprintf(tw, "%s\t%s\t%s\tdelta\t\n", t.Unit, r.OldLabel, r.NewLabel)
	cellText := func(s *benchmath.Sample, sum benchmath.Summary) string {
		if s == nil {
			return "-"
		}
		return benchunit.Scale(sum.Center, cls) + " ± " + sum.PctRangeString()
	}
	var logOld, logNew float64
	var nGeo int
	notes := make(map[string][]string)
	var noteOrder []string
	for _, row := range t.Rows {
		delta := ""
		if row.Old != nil && row.New != nil {
			if row.Significant || row.Regressed {
				delta = FormatDelta(row.Delta)
			} else {
				delta = "~"
			}
			delta += " (" + row.Comparison.String() + ")"
			if o, n := row.OldSummary.Center, row.NewSummary.Center; o > 0 && n > 0 {
				logOld += math.Log(o)
				logNew += math.Log(n)
				nGeo++
			}
		}
		mark := ""
		if row.Regressed {
			mark = "REGRESSION: " + row.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Name, cellText(row.Old, row.OldSummary), cellText(row.New, row.NewSummary), delta, mark)
		for _, e := range row.Warnings {
			m := e.Error()
			if _, ok := notes[m]; !ok {
				noteOrder = append(noteOrder, m)
			}
			notes[m] = append(notes[m], row.Name)
		}
	}
	if len(t.Rows) > 1 && nGeo > 0 {
		o, n := math.Exp(logOld/float64(nGeo)), math.Exp(logNew/float64(nGeo))
		fmt.Fprintf(tw, "geomean\t%s\t%s\t%s\t\n", benchunit.Scale(o, cls), benchunit.Scale(n, cls), FormatDelta(relDelta(o, n)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			fmt.Fprintln(w, strings.TrimRight(line, " \n"))
		}
	}
	sort.SliceStable(noteOrder, func(i, j int) bool { return len(notes[noteOrder[i]]) > len(notes[noteOrder[j]]) })
	for _, m := range noteOrder {
		names := notes[m]
		list := strings.Join(names, ", ")
		if len(names) > 3 {
			list = strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
		}
		fmt.Fprintf(w, "note: %s: %s\n", m, list)
	}
	return nil
}
