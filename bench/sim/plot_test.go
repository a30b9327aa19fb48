package sim

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func panel(t *testing.T, points bool) *plot.Plot {
	p := plot.New()
	for i := range 2 {
		require.NoError(t, AddLine(p, "line", plotter.XYs{{X: 0, Y: float64(i)}, {X: 1, Y: 2}}, Palette(i, i, points), i == 0))
	}
	return p
}

func TestWriteFigure(t *testing.T) {
	for _, n := range []int{1, 3} {
		ps := make([]*plot.Plot, n)
		for i := range ps {
			ps[i] = panel(t, i == 0)
		}
		var svg, png bytes.Buffer
		require.NoError(t, WriteFigure(&svg, "svg", 4*vg.Inch, 3*vg.Inch, ps...))
		require.Contains(t, svg.String(), "<svg")
		require.NoError(t, WriteFigure(&png, "png", 4*vg.Inch, 3*vg.Inch, ps...))
		require.True(t, bytes.HasPrefix(png.Bytes(), []byte("\x89PNG\r\n\x1a\n")))
	}
	require.Error(t, WriteFigure(&bytes.Buffer{}, "gif", vg.Inch, vg.Inch, panel(t, false)))
	require.Error(t, WriteFigure(&bytes.Buffer{}, "svg", vg.Inch, vg.Inch))
	require.ErrorContains(t, AddLine(plot.New(), "nan", plotter.XYs{{X: math.NaN()}}, Palette(0, 0, false), false), "plot nan")
}

func TestWriteFigureFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteFigureFile(filepath.Join(dir, "f.svg"), vg.Inch, vg.Inch, panel(t, true)))
	st, err := os.Stat(filepath.Join(dir, "f.svg"))
	require.NoError(t, err)
	require.Positive(t, st.Size())
	require.Error(t, WriteFigureFile(filepath.Join(dir, "f.gif"), vg.Inch, vg.Inch, panel(t, true)))
	_, err = os.Stat(filepath.Join(dir, "f.gif"))
	require.True(t, os.IsNotExist(err), "a refused file is not created")
}
