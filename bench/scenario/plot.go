package scenario

import (
	"fmt"
	"io"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// The figure's size.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 8 * vg.Inch
)

// panels draws the time series of the results of scenario sc whose
// policies sc.Plot lists: three panels over simulated time, one line per
// policy, for usage (% of the pool), cumulative failed reservation calls
// and cumulative evictions.
func panels(sc *Scenario, results []*Result) ([]*plot.Plot, error) {
	if sc.Plot == nil {
		return nil, fmt.Errorf("%s: no plot directive", sc.Name)
	}
	var rs []*Result
	for _, name := range sc.Plot.Policies {
		for _, r := range results {
			if r.Scenario == sc.Name && r.Policy.Name == name {
				rs = append(rs, r)
			}
		}
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no result for the plotted policies", sc.Name)
	}
	unit, uname := time.Minute, "minutes"
	if rs[0].Sim >= 2*time.Hour {
		unit, uname = time.Hour, "hours"
	}
	specs := []struct {
		title, ylabel string
		y             func(Sample) float64
	}{
		{sc.Name + ": L1 usage", "usage (% of pool)", func(s Sample) float64 { return 100 * s.Usage }},
		{"failed reservation calls (\"Failed to allocate\"), cumulative", "failed calls", func(s Sample) float64 { return float64(s.FailedCalls) }},
		{"evicted objects, cumulative", "evictions", func(s Sample) float64 { return float64(s.Evictions) }},
	}
	var ps []*plot.Plot
	for i, pn := range specs {
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
			if err := sim.AddLine(p, r.Policy.Name, xys, sim.Palette(j, j, false), i == 0); err != nil {
				return nil, err
			}
		}
		if i == 0 {
			p.Y.Min, p.Y.Max = 0, 100
			p.Legend.Top, p.Legend.Left = false, false
		} else {
			p.Y.Min = 0
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// WritePlot draws the time series of the results of scenario sc whose
// policies sc.Plot lists (three panels: usage, cumulative failed
// reservation calls, cumulative evictions, one line per policy) and
// writes the figure to w as format "svg" or "png".
func WritePlot(w io.Writer, format string, sc *Scenario, results []*Result) error {
	ps, err := panels(sc, results)
	if err != nil {
		return err
	}
	return sim.WriteFigure(w, format, plotWidth, plotHeight, ps...)
}

// WritePlotFile is WritePlot to a file, the format chosen by the
// extension: ".svg" or ".png".
func WritePlotFile(path string, sc *Scenario, results []*Result) error {
	ps, err := panels(sc, results)
	if err != nil {
		return err
	}
	return sim.WriteFigureFile(path, plotWidth, plotHeight, ps...)
}
