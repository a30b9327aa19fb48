package scenario

import (
	"fmt"
	"io"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot size and resolution.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 8 * vg.Inch
	plotDPI    = 96
)

// PlotFormat is an output format of WritePlot.
type PlotFormat uint8

// Plot formats.
const (
	SVG PlotFormat = iota
	PNG
)

// WritePlot draws the time series of the results of scenario sc whose
// policies sc.Plot lists: three panels over simulated time, one line per
// policy, for usage (% of the pool), cumulative failed reservation calls
// and cumulative evictions. It writes the figure to w as SVG or PNG.
func WritePlot(w io.Writer, format PlotFormat, sc *Scenario, results []*Result) error {
	if sc.Plot == nil {
		return fmt.Errorf("%s: no plot directive", sc.Name)
	}
	var rs []*Result
	for _, name := range sc.Plot.Policies {
		for _, r := range results {
			if r.Scenario == sc.Name && r.Policy.String() == name {
				rs = append(rs, r)
			}
		}
	}
	if len(rs) == 0 {
		return fmt.Errorf("%s: no result for the plotted policies", sc.Name)
	}
	unit, uname := time.Minute, "minutes"
	if rs[0].Sim >= 2*time.Hour {
		unit, uname = time.Hour, "hours"
	}
	panels := []struct {
		title, ylabel string
		y             func(Sample) float64
	}{
		{sc.Name + ": L1 usage", "usage (% of pool)", func(s Sample) float64 { return 100 * s.Usage }},
		{"failed reservation calls (\"Failed to allocate\"), cumulative", "failed calls", func(s Sample) float64 { return float64(s.FailedCalls) }},
		{"evicted objects, cumulative", "evictions", func(s Sample) float64 { return float64(s.Evictions) }},
	}
	grid := make([][]*plot.Plot, len(panels))
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "simulated time (" + uname + ")"
		p.Y.Label.Text = pn.ylabel
		p.Add(plotter.NewGrid())
		for j, r := range rs {
			xys := make(plotter.XYs, len(r.Series))
			for k, s := range r.Series {
				xys[k] = plotter.XY{X: float64(s.T) / float64(unit), Y: pn.y(s)}
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return fmt.Errorf("%s: %v", r.Policy, err)
			}
			l.Color = plotutil.Color(j)
			l.Dashes = plotutil.Dashes(j)
			l.Width = vg.Points(1.2)
			p.Add(l)
			if i == 0 {
				p.Legend.Add(r.Policy.String(), l)
			}
		}
		if i == 0 {
			p.Y.Min, p.Y.Max = 0, 100
			p.Legend.Top, p.Legend.Left = false, false
		} else {
			p.Y.Min = 0
		}
		grid[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(10)}
	var (
		dc draw.Canvas
		wt io.WriterTo
	)
	switch format {
	case SVG:
		c := vgsvg.New(plotWidth, plotHeight)
		dc, wt = draw.New(c), c
	case PNG:
		c := vgimg.NewWith(vgimg.UseWH(plotWidth, plotHeight), vgimg.UseDPI(plotDPI))
		dc, wt = draw.New(c), vgimg.PngCanvas{Canvas: c}
	default:
		return fmt.Errorf("unknown plot format %d", format)
	}
	for i, row := range plot.Align(grid, tiles, dc) {
		grid[i][0].Draw(row[0])
	}
	_, err := wt.WriteTo(w)
	return err
}

// WritePlotFile is WritePlot to a file, the format chosen by the
// extension: ".svg" or ".png".
func WritePlotFile(path string, sc *Scenario, results []*Result) error {
	var format PlotFormat
	switch {
	case len(path) > 4 && path[len(path)-4:] == ".svg":
		format = SVG
	case len(path) > 4 && path[len(path)-4:] == ".png":
		format = PNG
	default:
		return fmt.Errorf("%s: want a .svg or .png file", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WritePlot(f, format, sc, results); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
