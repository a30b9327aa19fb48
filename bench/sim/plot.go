package sim

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
	_ "gonum.org/v1/plot/vg/vgimg" // the png format, at 96 dpi
	_ "gonum.org/v1/plot/vg/vgsvg" // the svg format
)

// LineStyle is how AddLine draws a series.
type LineStyle struct {
	Color  color.Color
	Dashes []vg.Length
	Width  vg.Length
	// Shape, if set, marks every point with a glyph.
	Shape draw.GlyphDrawer
}

// Palette returns style i of plotutil's palette, 1.2 pt wide: color i,
// dash pattern dash and, with points, glyph i.
func Palette(i, dash int, points bool) LineStyle {
	s := LineStyle{Color: plotutil.Color(i), Dashes: plotutil.Dashes(dash), Width: vg.Points(1.2)}
	if points {
		s.Shape = plotutil.Shape(i)
	}
	return s
}

// AddLine draws xys on p in style s and, with legend, names it in p's
// legend.
func AddLine(p *plot.Plot, name string, xys plotter.XYs, s LineStyle, legend bool) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("plot %s: %v", name, err)
	}
	l.Color, l.Dashes, l.Width = s.Color, s.Dashes, s.Width
	p.Add(l)
	things := []plot.Thumbnailer{l}
	if s.Shape != nil {
		pts, err := plotter.NewScatter(xys)
		if err != nil {
			return fmt.Errorf("plot %s: %v", name, err)
		}
		pts.Color, pts.Shape = s.Color, s.Shape
		p.Add(pts)
		things = append(things, pts)
	}
	if legend {
		p.Legend.Add(name, things...)
	}
	return nil
}

// WriteFigure draws panels stacked top to bottom on a width × height
// canvas (one panel fills it) and writes it to w in format "svg" or
// "png".
func WriteFigure(w io.Writer, format string, width, height vg.Length, panels ...*plot.Plot) error {
	if format != "svg" && format != "png" {
		return fmt.Errorf("plot format %q: want svg or png", format)
	}
	if len(panels) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	c, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	if len(panels) == 1 {
		panels[0].Draw(dc)
	} else {
		grid := make([][]*plot.Plot, len(panels))
		for i, p := range panels {
			grid[i] = []*plot.Plot{p}
		}
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4),
			PadLeft: vg.Points(4), PadRight: vg.Points(8), PadY: vg.Points(10)}
		for i, row := range plot.Align(grid, tiles, dc) {
			grid[i][0].Draw(row[0])
		}
	}
	_, err = c.WriteTo(w)
	return err
}

// WriteFigureFile is WriteFigure to a file whose extension, .svg or .png,
// is the format. A file of another extension is refused before it is
// created.
func WriteFigureFile(path string, width, height vg.Length, panels ...*plot.Plot) error {
	ext := filepath.Ext(path)
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("%s: want a .svg or .png file", path)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteFigure(f, ext[1:], width, height, panels...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
