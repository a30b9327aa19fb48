package sim

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTableWriters(t *testing.T) {
	tb := &Table{Columns: []string{"policy", "hits"}, Rows: [][]string{{"a", "1"}, {"long name", "1234"}}}
	var txt, md bytes.Buffer
	require.NoError(t, tb.WriteText(&txt))
	require.Equal(t, "     policy  hits\n          a     1\n  long name  1234\n\n", txt.String())
	require.NoError(t, WritePreamble(&md, "# Title\n\n"))
	require.NoError(t, WritePreamble(&md, ""))
	require.NoError(t, tb.WriteMarkdown(&md))
	require.Equal(t, "# Title\n\n| policy | hits |\n|---|--:|\n| a | 1 |\n| long name | 1234 |\n\n", md.String())
}

func TestFormats(t *testing.T) {
	for b, want := range map[int64]string{1: "1B", 4096: "4KiB", 1 << 20: "1MiB", 1536 << 10: "1536KiB", 1000: "1000B", 45 << 30: "45GiB", 3 << 40: "3TiB"} {
		require.Equal(t, want, FormatSize(b), "%d", b)
	}
	require.Equal(t, "12.5%", Percent(0.125, 1))
	require.Equal(t, "12.50%", Percent(0.125, 2))
	require.Equal(t, []string{"+0.46pp", "-1.30pp", "+0.0pp"}, []string{PercentPoints(0.0046, 2), PercentPoints(-0.013, 2), PercentPoints(0, 1)})
}
