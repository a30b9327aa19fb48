package history

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// A Series is one measure over a history's runs.
type Series struct {
	// Title names the measure, such as "L1Cycle/keys=5700 ns/key ÷
	// Floor/map ns/key".
	Title string

	// YLabel labels the values, such as "ratio".
	YLabel string

	// Values holds one value per run, in run order; NaN where the run
	// lacks the measure (a benchmark skipped or not yet written).
	Values []float64

	// Bound, when not NaN, is drawn as a dashed line: the target.
	Bound float64
}

// Plot draws s over the runs labelled by labels (one per value, such as
// Run.Short) into path; the extension (.svg, .png, .pdf) picks the format.
// A gap in the line marks a run without a value. It fails when no run has
// a value.
func Plot(path string, labels []string, s Series) error {
	if len(labels) != len(s.Values) {
		return fmt.Errorf("history: %d labels for %d values", len(labels), len(s.Values))
	}
	p := plot.New()
	p.Title.Text = s.Title
	p.X.Label.Text = "run (commit, oldest first)"
	p.Y.Label.Text = s.YLabel
	p.Y.Min = 0

	var seg plotter.XYs
	segments := []plotter.XYs{}
	for i, v := range s.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			if len(seg) > 0 {
				segments = append(segments, seg)
				seg = nil
			}
			continue
		}
		seg = append(seg, plotter.XY{X: float64(i), Y: v})
	}
	if len(seg) > 0 {
		segments = append(segments, seg)
	}
	if len(segments) == 0 {
		return fmt.Errorf("history: %s: no run has a value", s.Title)
	}
	for _, seg := range segments {
		line, points, err := plotter.NewLinePoints(seg)
		if err != nil {
			return err
		}
		line.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255}
		points.Color = line.Color
		p.Add(line, points)
	}
	if !math.IsNaN(s.Bound) {
		bound, err := plotter.NewLine(plotter.XYs{{X: 0, Y: s.Bound}, {X: float64(max(len(labels)-1, 1)), Y: s.Bound}})
		if err != nil {
			return err
		}
		bound.Color = color.RGBA{R: 214, G: 39, B: 40, A: 255}
		bound.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(bound)
		p.Legend.Add(fmt.Sprintf("target %g", s.Bound), bound)
		p.Legend.Top = true
	}
	ticks := make([]plot.Tick, len(labels))
	for i, l := range labels {
		ticks[i] = plot.Tick{Value: float64(i), Label: l}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign = -1
	p.X.Tick.Label.YAlign = -1
	p.Add(plotter.NewGrid())
	w := vg.Length(max(6, min(16, 2+0.35*float64(len(labels))))) * vg.Inch
	return p.Save(w, 3.5*vg.Inch, path)
}
