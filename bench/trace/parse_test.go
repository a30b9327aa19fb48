package trace

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const goodLine = `{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]}`

func TestParseRejectsBadInput(t *testing.T) {
	cases := []struct {
		name, input, want string
	}{
		{"not JSON", "hello\n", "bad.jsonl:1: invalid character"},
		{"bad second line", goodLine + "\n{\"timestamp\": 1,\n", "bad.jsonl:2:"},
		{"missing timestamp", `{"input_length": 1, "output_length": 1, "hash_ids": [1]}`, ":1: missing timestamp"},
		{"missing input_length", `{"timestamp": 1, "output_length": 1, "hash_ids": [1]}`, ":1: missing input_length"},
		{"missing output_length", `{"timestamp": 1, "input_length": 1, "hash_ids": [1]}`, ":1: missing output_length"},
		{"missing hash_ids", `{"timestamp": 1, "input_length": 1, "output_length": 1}`, ":1: missing hash_ids"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, ":1: timestamp -1 outside"},
		{"huge timestamp", `{"timestamp": 1e300, "input_length": 1, "output_length": 1, "hash_ids": [1]}`, "outside [0,"},
		{"zero input", `{"timestamp": 1, "input_length": 0, "output_length": 1, "hash_ids": []}`, "input_length 0 must be positive"},
		{"negative output", `{"timestamp": 1, "input_length": 1, "output_length": -2, "hash_ids": [1]}`, "output_length -2 must not be negative"},
		{"too few blocks", `{"timestamp": 1, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}`, "hash_ids has 2 blocks but input_length 1025 needs 3 blocks of 512 tokens"},
		{"too many blocks", `{"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [1, 2]}`, "needs 1 blocks"},
		{"fractional id", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [1.5]}`, ":1: json: cannot unmarshal number 1.5"},
		{"string id", `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": ["a"]}`, "cannot unmarshal string"},
		{"array line", `[1, 2]`, "cannot unmarshal array"},
		{"empty", "\n\n", "no requests"},
		{"bad gzip", "\x1f\x8bnot gzip at all", "gzip"},
		{"long line", strings.Repeat(" ", maxLine+1), "bad.jsonl:1: line longer than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := Parse("bad.jsonl", strings.NewReader(c.input), 0)
			require.Nil(t, tr)
			require.Error(t, err)
			require.True(t, errors.Is(err, ErrFormat), "%v does not wrap ErrFormat", err)
			require.Contains(t, err.Error(), c.want)
			require.Equal(t, 1, strings.Count(err.Error(), "trace:"), "one package prefix: %v", err)
		})
	}
	_, err := Parse("x", strings.NewReader(goodLine), -1)
	require.ErrorIs(t, err, ErrFormat)
}

func TestParseReadsPlainAndGzip(t *testing.T) {
	// Out of order, with a blank line and an unknown field: requests are
	// sorted by timestamp (stably), ids renumbered in order of appearance.
	in := `{"timestamp": 2000, "input_length": 1024, "output_length": 5, "hash_ids": [9, 4], "session_id": 3}

{"timestamp": 1000.5, "input_length": 600, "output_length": 3, "hash_ids": [9, 8]}
{"timestamp": 2000, "input_length": 1, "output_length": 0, "hash_ids": [4]}
`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err := zw.Write([]byte(in))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	dir := t.TempDir()
	plain, zipped := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "t.jsonl.gz")
	require.NoError(t, os.WriteFile(plain, []byte(in), 0o644))
	require.NoError(t, os.WriteFile(zipped, gz.Bytes(), 0o644))
	for _, path := range []string{plain, zipped} {
		tr, err := ReadFile(path, 512)
		require.NoError(t, err)
		require.Equal(t, 3, tr.Distinct)
		require.EqualValues(t, 5, tr.Refs)
		require.EqualValues(t, 1625, tr.Tokens)
		require.Len(t, tr.Requests, 3)
		require.Equal(t, Request{Arrival: 1_000_500_000, Input: 600, Output: 3, Blocks: []int32{0, 2}, Line: 3}, tr.Requests[0])
		require.Equal(t, []int32{0, 1}, tr.Requests[1].Blocks)
		require.Equal(t, 1, tr.Requests[1].Line)
		require.Equal(t, []int32{1}, tr.Requests[2].Blocks)
		require.EqualValues(t, 600, tr.HitTokens(&tr.Requests[0], 2))
		require.EqualValues(t, 512, tr.HitTokens(&tr.Requests[0], 1))
	}
	_, err = ReadFile(filepath.Join(dir, "missing"), 0)
	require.Error(t, err)
}

func TestParsePool(t *testing.T) {
	ps, err := ParsePools("0.1, 0.25,1,4GiB,1.5MiB")
	require.NoError(t, err)
	require.Equal(t, []Pool{{Fraction: 0.1}, {Fraction: 0.25}, {Fraction: 1}, {Bytes: 4 << 30}, {Bytes: 3 << 19}}, ps)
	for _, bad := range []string{"0", "1.5", "-0.1", "x", "0.5B", "GiB", "-1GiB", ""} {
		_, err := ParsePool(bad)
		require.ErrorIs(t, err, ErrOptions, bad)
	}
	tr := &Trace{Distinct: 1000}
	require.EqualValues(t, 250, Pool{Fraction: 0.25}.Slots(tr, Options{}))
	require.EqualValues(t, 16, Pool{Bytes: 1 << 20}.Slots(tr, Options{}))                // 64 KiB blocks
	require.EqualValues(t, 256, Pool{Bytes: 1 << 20}.Slots(tr, Options{BlockSize: 100})) // 4 KiB aligned
}

func TestOptionsRejected(t *testing.T) {
	tr := parseString(t, handTrace)
	for _, o := range []Options{
		{Slots: 0},
		{Slots: 1, PrefillRate: -1},
		{Slots: 1, Rate: -2},
		{Slots: 1, Watermark: 1.5},
		{Slots: 1, SweepRatio: 2},
		{Slots: 1, BlockSize: -5},
		{Slots: 1, Align: 3},
	} {
		_, err := Run(tr, Policies[0], o)
		require.ErrorIs(t, err, ErrOptions, "%+v", o)
	}
	_, err := SelectPolicies("on-demand/nope")
	require.Error(t, err)
	ps, err := SelectPolicies("periodic/*,on-demand/scattered")
	require.NoError(t, err)
	require.Len(t, ps, 6) // three placements under LRU, prefix and S3-FIFO; one on-demand
}

func TestKeepFastestCatchesNondeterminism(t *testing.T) {
	var best *Result
	require.NoError(t, keepFastest(&best, &Result{Policy: "p", Hits: 5, Busy: 30}))
	require.NoError(t, keepFastest(&best, &Result{Policy: "p", Hits: 5, Busy: 10}))
	require.NoError(t, keepFastest(&best, &Result{Policy: "p", Hits: 5, Busy: 20}))
	require.EqualValues(t, 10, best.Busy)
	err := keepFastest(&best, &Result{Policy: "p", Hits: 6, Busy: 5})
	require.ErrorContains(t, err, "not deterministic")
	require.EqualValues(t, 10, best.Busy)
}
