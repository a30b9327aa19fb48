package trace

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// hitRatePlot draws hit rate against pool size, one line per policy and
// one each for the ideal LRU and Belady bounds, from the tables of one
// trace (one table per pool size).
func hitRatePlot(tables []*Table) (*plot.Plot, error) {
	if len(tables) == 0 {
		return nil, fmt.Errorf("trace: nothing to plot")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: block hit rate by pool size", filepath.Base(tables[0].Trace.Name))
	p.X.Label.Text = fmt.Sprintf("pool (fraction of the %d distinct blocks)", tables[0].Trace.Distinct)
	p.Y.Label.Text = "block hit rate (%)"
	p.Add(plotter.NewGrid())
	series := func(pick func(*Table) *Result) plotter.XYs {
		xys := make(plotter.XYs, len(tables))
		for i, t := range tables {
			xys[i] = plotter.XY{X: float64(t.Slots) / float64(t.Trace.Distinct), Y: 100 * pick(t).HitRate()}
		}
		return xys
	}
	bound := func(dashes []vg.Length, shape draw.GlyphDrawer) sim.LineStyle {
		return sim.LineStyle{Color: color.Black, Dashes: dashes, Width: vg.Points(2), Shape: shape}
	}
	if err := sim.AddLine(p, BeladyName, series(func(t *Table) *Result { return t.Belady }), bound(nil, draw.BoxGlyph{}), true); err != nil {
		return nil, err
	}
	if err := sim.AddLine(p, LRUName, series(func(t *Table) *Result { return t.LRU }), bound([]vg.Length{vg.Points(6), vg.Points(3)}, draw.TriangleGlyph{}), true); err != nil {
		return nil, err
	}
	for j, r := range tables[0].Policies {
		if err := sim.AddLine(p, r.Policy, series(func(t *Table) *Result { return t.Policies[j] }), sim.Palette(j, j+1, true), true); err != nil {
			return nil, err
		}
	}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(20)
	return p, nil
}

// The hit-rate plot's size.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 6 * vg.Inch
)

// WritePlot writes the hit-rate plot of the tables of one trace (one table
// per pool size) to w as format "svg" or "png".
func WritePlot(w io.Writer, format string, tables []*Table) error {
	p, err := hitRatePlot(tables)
	if err != nil {
		return err
	}
	return sim.WriteFigure(w, format, plotWidth, plotHeight, p)
}

// WritePlotFile is WritePlot to a file whose extension, .svg or .png, is
// the format.
func WritePlotFile(path string, tables []*Table) error {
	p, err := hitRatePlot(tables)
	if err != nil {
		return err
	}
	return sim.WriteFigureFile(path, plotWidth, plotHeight, p)
}
