package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const tiny = `{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}
{"timestamp": 1000, "input_length": 1536, "output_length": 1, "hash_ids": [1, 2, 3]}
{"timestamp": 2000, "input_length": 512, "output_length": 1, "hash_ids": [4]}
{"timestamp": 3000, "input_length": 1024, "output_length": 1, "hash_ids": [1, 5]}
`

func TestRunWritesTablesAndPlots(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(tiny), 0o644))
	var out, errb bytes.Buffer
	err := run([]string{"-pool", "0.4,1,1MiB", "-block-size", "65536", "-out", dir, "-j", "2", path}, &out, &errb)
	require.NoError(t, err, errb.String())
	s := out.String()
	for _, want := range []string{"pool 0.4 of 5 distinct blocks = 2 blocks", "pool 1MiB = 16 blocks", "on-demand/scattered", "ideal LRU", "Belady", "hit rate"} {
		require.Contains(t, s, want)
	}
	for _, f := range []string{"tiny.md", "tiny-hitrate.svg", "tiny-hitrate.png"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	md, err := os.ReadFile(filepath.Join(dir, "tiny.md"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(md), "# Trace replay: tiny.jsonl"))
}

func TestRunRejectsBadArguments(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{}\n"), 0o644))
	good := filepath.Join(dir, "good.jsonl")
	require.NoError(t, os.WriteFile(good, []byte(tiny), 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no trace file"},
		{[]string{"-pool", "2", bad}, "pool \"2\""},
		{[]string{"-policies", "lifo", bad}, "no policy matches \"lifo\""},
		{[]string{"-block-size", "0.5", bad}, "-block-size"},
		{[]string{"-block-size", "-4096", bad}, "-block-size"},
		{[]string{"-pool", "1", "-rate", "-1", good}, "rate multiplier -1"},
		{[]string{"-pool", "1", "-prefill-rate", "-1", good}, "prefill rate -1"},
		{[]string{"-pool", "1B", good}, "pool of 0 blocks"},
		{[]string{bad}, "bad.jsonl:1: missing timestamp"},
	} {
		var out, errb bytes.Buffer
		err := run(c.args, &out, &errb)
		require.Error(t, err, c.args)
		require.Contains(t, err.Error(), c.want, c.args)
	}
}
