package trace

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WritePlot draws hit rate against pool size, one line per policy and one
// each for the ideal LRU and Belady bounds, from the tables of one trace
// (one table per pool size), and writes it to w as format "svg" or "png".
func WritePlot(w io.Writer, format string, tables []*Table) error {
	if len(tables) == 0 {
		return fmt.Errorf("trace: nothing to plot")
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
	add := func(name string, xys plotter.XYs, c color.Color, dashes []vg.Length, width vg.Length, shape draw.GlyphDrawer) error {
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("trace: plot %s: %v", name, err)
		}
		l.Color, l.Dashes, l.Width = c, dashes, width
		pts.Color, pts.Shape = c, shape
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
		return nil
	}
	black := color.Black
	if err := add(BeladyName, series(func(t *Table) *Result { return t.Belady }), black, nil, vg.Points(2), draw.BoxGlyph{}); err != nil {
		return err
	}
	if err := add(LRUName, series(func(t *Table) *Result { return t.LRU }), black, []vg.Length{vg.Points(6), vg.Points(3)}, vg.Points(2), draw.TriangleGlyph{}); err != nil {
		return err
	}
	for j, r := range tables[0].Policies {
		if err := add(r.Policy, series(func(t *Table) *Result { return t.Policies[j] }), plotutil.Color(j), plotutil.Dashes(j+1), vg.Points(1.2), plotutil.Shape(j)); err != nil {
			return err
		}
	}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(20)
	wt, err := p.WriterTo(8*vg.Inch, 6*vg.Inch, format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// WritePlotFile is WritePlot to a file whose extension, .svg or .png, is
// the format.
func WritePlotFile(path string, tables []*Table) error {
	ext := filepath.Ext(path)
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("trace: %s: want a .svg or .png file", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WritePlot(f, ext[1:], tables); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
