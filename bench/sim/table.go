package sim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Table is one table of a report: column headings and rows of cells, the
// first column the row's label.
type Table struct {
	Columns []string
	Rows    [][]string
}

// WriteText writes t as aligned text, every column right-aligned, then a
// blank line.
func (t *Table) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(t.Columns, "\t")+"\t")
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WriteMarkdown writes t as a markdown table, the first column
// left-aligned and the others right-aligned, then a blank line.
func (t *Table) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "| %s |\n|---|%s\n", strings.Join(t.Columns, " | "), strings.Repeat("--:|", len(t.Columns)-1))
	for _, r := range t.Rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WritePreamble writes a markdown report's preamble, if any, and a blank
// line after it.
func WritePreamble(w io.Writer, preamble string) error {
	if preamble == "" {
		return nil
	}
	_, err := fmt.Fprintf(w, "%s\n\n", strings.TrimRight(preamble, "\n"))
	return err
}

// Percent writes f as a percentage with the given decimals ("12.5%").
func Percent(f float64, decimals int) string {
	return strconv.FormatFloat(100*f, 'f', decimals, 64) + "%"
}

// PercentPoints writes a difference of two rates in percentage points,
// signed, with the given decimals ("+0.46pp", "-1.30pp").
func PercentPoints(f float64, decimals int) string {
	s := strconv.FormatFloat(100*f, 'f', decimals, 64)
	if f >= 0 {
		s = "+" + s
	}
	return s + "pp"
}

// SizeUnits are the IEC byte-size units, largest first, so that a suffix
// match tries "KiB" before "B".
var SizeUnits = []struct {
	Suffix string
	Mult   int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// FormatSize writes a byte count in the largest IEC unit that divides it
// ("4GiB", "1536KiB", "100B").
func FormatSize(b int64) string {
	for _, u := range SizeUnits {
		if b >= u.Mult && b%u.Mult == 0 {
			return strconv.FormatInt(b/u.Mult, 10) + u.Suffix
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}
