//go:build linux

package node

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// The hit-rate plot's size.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 6 * vg.Inch
)

// hitRatePlot draws block hit rate against pool size under the first
// policy: the shared pool (any routing; the in-process single engine is
// the same line), the private pools by routing, and TP's private pools
// of P/8 when TP ran.
func (rep *Report) hitRatePlot() (*plot.Plot, error) {
	pts := rep.points(0)
	if len(pts) == 0 {
		return nil, fmt.Errorf("node: nothing to plot")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s, %d engines on a node: hit rate by pool size (%s)", trace.BaseName(rep.Trace.Name), Engines, pts[0].Policy.Name)
	p.X.Label.Text = fmt.Sprintf("node pool P (fraction of the %d distinct blocks; 0.1 = %s of %s KV)", rep.Trace.Distinct,
		bytesOf(float64(int64(0.1*float64(rep.Trace.Distinct))*BlockBytes)), Model)
	p.Y.Label.Text = "block hit rate (%)"
	p.Add(plotter.NewGrid())
	series := func(pick func(*Point) *Result) (plotter.XYs, bool) {
		var xys plotter.XYs
		for _, pt := range pts {
			r := pick(pt)
			if r == nil {
				return nil, false
			}
			xys = append(xys, plotter.XY{X: pt.Fraction, Y: 100 * r.HitRate()})
		}
		return xys, true
	}
	lines := []struct {
		name string
		pick func(*Point) *Result
	}{
		{"1 shared pool of P, either routing (= 1 engine in process)", func(pt *Point) *Result { return pt.DP[Shared][0] }},
		{"8 private pools of P/8, routed by conversation", func(pt *Point) *Result { return pt.DP[Private][1] }},
		{"8 private pools of P/8, round-robin", func(pt *Point) *Result { return pt.DP[Private][0] }},
		{"TP: 8 ranks' private pools of P/8", func(pt *Point) *Result { return pt.TP[Private] }},
	}
	for i, l := range lines {
		xys, ok := series(l.pick)
		if !ok {
			continue
		}
		style := sim.Palette(i, i, true)
		if i == 0 {
			style = sim.LineStyle{Color: color.Black, Width: vg.Points(2), Shape: draw.BoxGlyph{}}
		}
		if err := sim.AddLine(p, l.name, xys, style, true); err != nil {
			return nil, err
		}
	}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(20)
	return p, nil
}

// WritePlotFile writes the hit-rate plot to path, .svg or .png.
func (rep *Report) WritePlotFile(path string) error {
	p, err := rep.hitRatePlot()
	if err != nil {
		return err
	}
	return sim.WriteFigureFile(path, plotWidth, plotHeight, p)
}
