package main

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeEveryType(t *testing.T) {
	file := "go test fuzz v1\n" +
		"[]byte(\"\\x00\\xffab\")\n" +
		"string(\"hi\\n\")\n" +
		"bool(true)\n" +
		"int(-5)\n" +
		"int8(-128)\n" +
		"int16(300)\n" +
		"rune('é')\n" +
		"int64(9223372036854775807)\n" +
		"uint(7)\n" +
		"byte('A')\n" +
		"uint16(0xffff)\n" +
		"uint32(1)\n" +
		"uint64(18446744073709551615)\n" +
		"float32(1.5)\n" +
		"float64(-2.25)\n" +
		"float64(math.Float64frombits(0x7ff8000000000001))\n"
	vals, err := Decode([]byte(file))
	require.NoError(t, err)
	require.Len(t, vals, 16)
	assert.Equal(t, []byte{0, 0xff, 'a', 'b'}, vals[0])
	assert.Equal(t, "hi\n", vals[1])
	assert.Equal(t, true, vals[2])
	assert.Equal(t, -5, vals[3])
	assert.Equal(t, int8(-128), vals[4])
	assert.Equal(t, int16(300), vals[5])
	assert.Equal(t, int32('é'), vals[6])
	assert.Equal(t, int64(math.MaxInt64), vals[7])
	assert.Equal(t, uint(7), vals[8])
	assert.Equal(t, uint8('A'), vals[9])
	assert.Equal(t, uint16(0xffff), vals[10])
	assert.Equal(t, uint32(1), vals[11])
	assert.Equal(t, uint64(math.MaxUint64), vals[12])
	assert.Equal(t, float32(1.5), vals[13])
	assert.Equal(t, -2.25, vals[14])
	assert.Equal(t, uint64(0x7ff8000000000001), math.Float64bits(vals[15].(float64)))
}

func TestDecodeRejects(t *testing.T) {
	for _, bad := range []string{
		"",
		"go test fuzz v2\n[]byte(\"x\")\n",
		"go test fuzz v1\n[]int(\"x\")\n",
		"go test fuzz v1\nint8(300)\n",
		"go test fuzz v1\nbool(1)\n",
		"go test fuzz v1\n[]byte(x)\n",
		"go test fuzz v1\nos.Exit(1)\n",
	} {
		_, err := Decode([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestEncodeLayouts(t *testing.T) {
	// One []byte: a zero weight byte, then the payload.
	got, err := Encode([]any{[]byte("abc")}, "v2")
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 'a', 'b', 'c'}, got)
	got, err = Encode([]any{[]byte("abc")}, "raw")
	require.NoError(t, err)
	assert.Equal(t, []byte("abc"), got)
	// Fixed-size arguments first, big-endian, whatever their position.
	got, err = Encode([]any{"xy", uint16(0x0102), true, int8(-1)}, "v2")
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2, 1, 0xff, 0, 'x', 'y'}, got)

	// consumer: a 4-byte big-endian length, then the payload.
	got, err = Encode([]any{[]byte("abc")}, "consumer")
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 3, 'a', 'b', 'c'}, got)
	got, err = Encode([]any{"xy"}, "consumer")
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 2, 'x', 'y'}, got)

	_, err = Encode([]any{[]byte("a"), []byte("b")}, "v2")
	assert.ErrorContains(t, err, "only one")
	_, err = Encode([]any{uint8(1), []byte("b")}, "raw")
	assert.Error(t, err)
	_, err = Encode([]any{uint8(1), []byte("b")}, "consumer")
	assert.Error(t, err)
	_, err = Encode([]any{[]byte("b")}, "v3")
	assert.Error(t, err)
}

// TestDecodeInputConsumer follows go-fuzz-headers' GetBytes by hand; the
// build-tagged TestLayoutMatchesBuilder checks it against the code itself.
func TestDecodeInputConsumer(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string // "" with notRun: the harness never calls the target
		run  bool
	}{
		{[]byte{0, 0, 0, 3, 'a', 'b', 'c'}, "abc", true},
		{[]byte{0, 0, 0, 1, 'a', 'b', 'c'}, "a", true}, // shorter than what is left
		{[]byte{0, 0, 0, 4, 'a', 'b', 'c'}, "a", true}, // 4 % 3
		{[]byte{0, 0, 0, 6, 'a', 'b', 'c'}, "", true},  // 6 % 3: an empty argument
		{[]byte{0, 0, 0, 0, 'a', 'b', 'c'}, "", true},  // 0 means 30; 30 % 3
		{append([]byte{0, 0, 0, 0}, make([]byte, 30)...), string(make([]byte, 30)), true},
		{[]byte{0xff, 0xff, 0xff, 0xff, 'a', 'b'}, "a", true}, // 2^32-1 % 2
		{[]byte{0, 0, 0, 3}, "", false},                       // nothing after the length
		{[]byte{0, 0, 3}, "", false},                          // no length
		{nil, "", false},
	} {
		got, err := DecodeInput(c.in, "consumer")
		if !c.run {
			assert.ErrorIs(t, err, errNotRun, "%x", c.in)
			continue
		}
		require.NoError(t, err, "%x", c.in)
		assert.Equal(t, c.want, string(got), "%x", c.in)
	}
	// The inverse of Encode for every non-empty payload.
	for _, p := range [][]byte{{0}, []byte("0&"), make([]byte, 100000)} {
		raw, err := Encode([]any{p}, "consumer")
		require.NoError(t, err)
		got, err := DecodeInput(raw, "consumer")
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	got, err := DecodeInput([]byte{0, 'x'}, "v2")
	require.NoError(t, err)
	assert.Equal(t, []byte("x"), got)
	got, err = DecodeInput([]byte("x"), "raw")
	require.NoError(t, err)
	assert.Equal(t, []byte("x"), got)
	_, err = DecodeInput([]byte("x"), "v3")
	assert.Error(t, err)
}

// TestGoFileOfACrash writes a libFuzzer input back as go test would write a
// crasher: Go's corpus format, named by its SHA-256, one file per input.
func TestGoFileOfACrash(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "crash-1")
	require.NoError(t, os.WriteFile(input, []byte{0, 0, 0, 2, 0xff, '"'}, 0o644))
	corpus := filepath.Join(dir, "testdata", "fuzz", "FuzzX")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run([]string{"-go", corpus, input}, &stdout, &stderr), stderr.String())
	path := strings.TrimSpace(stdout.String())
	assert.Equal(t, corpus, filepath.Dir(path))
	assert.Len(t, filepath.Base(path), 16)
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "go test fuzz v1\n[]byte(\"\\xff\\\"\")\n", string(file))
	vals, err := Decode(file)
	require.NoError(t, err)
	assert.Equal(t, []any{[]byte{0xff, '"'}}, vals)
	// The same input, the same name; an input the harness never runs fails.
	require.Equal(t, 0, run([]string{"-go", corpus, input}, &stdout, &stderr))
	entries, _ := os.ReadDir(corpus)
	assert.Len(t, entries, 1)
	require.NoError(t, os.WriteFile(input, []byte{0, 0, 0, 2}, 0o644))
	stderr.Reset()
	assert.Equal(t, 1, run([]string{"-go", corpus, input}, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "never calls the target")
}

// TestZipOfTheCommittedCorpus builds the zip build.sh ships for every fuzz
// target from fuzz/testdata/fuzz/<Target>/ and checks each entry against
// the corpus file it came from: the payload's 4-byte length, then the
// payload, which DecodeInput gives back.
func TestZipOfTheCommittedCorpus(t *testing.T) {
	root := "../../fuzz/testdata/fuzz"
	targets, err := os.ReadDir(root)
	require.NoError(t, err)
	require.NotEmpty(t, targets)
	for _, target := range targets {
		dir := filepath.Join(root, target.Name())
		out := filepath.Join(t.TempDir(), target.Name()+"_seed_corpus.zip")
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run([]string{"-o", out, dir}, &stdout, &stderr), stderr.String())
		zr, err := zip.OpenReader(out)
		require.NoError(t, err)
		files, _ := os.ReadDir(dir)
		assert.Len(t, zr.File, len(files), target.Name())
		for _, f := range zr.File {
			src, err := os.ReadFile(filepath.Join(dir, f.Name))
			require.NoError(t, err, f.Name)
			lines := strings.Split(strings.TrimSpace(string(src)), "\n")
			require.Len(t, lines, 2, "%s: one []byte argument", f.Name)
			rc, err := f.Open()
			require.NoError(t, err)
			raw, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(raw), 4)
			want, err := Decode(src)
			require.NoError(t, err)
			payload := want[0].([]byte)
			assert.Equal(t, uint32(len(payload)), binary.BigEndian.Uint32(raw), "%s/%s: length", target.Name(), f.Name)
			assert.Equal(t, payload, raw[4:], "%s/%s", target.Name(), f.Name)
			if len(payload) > 0 {
				back, err := DecodeInput(raw, "consumer")
				require.NoError(t, err)
				assert.Equal(t, payload, back, "%s/%s", target.Name(), f.Name)
			}
		}
		zr.Close()
		// The same corpus gives the same zip.
		again := filepath.Join(t.TempDir(), "again.zip")
		require.Equal(t, 0, run([]string{"-o", again, dir}, &stdout, &stderr))
		a, _ := os.ReadFile(out)
		b, _ := os.ReadFile(again)
		assert.Equal(t, a, b, "zip is deterministic")
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 0, run([]string{"-h"}, &out, &errOut))
	assert.Equal(t, 2, run([]string{"dir"}, &out, &errOut))
	assert.Equal(t, 2, run([]string{"-layout", "v3", "-o", "x.zip", "dir"}, &out, &errOut))
	assert.Equal(t, 2, run([]string{"-o", "x.zip", "-go", "dir", "input"}, &out, &errOut), "-o and -go")
	assert.Equal(t, 1, run([]string{"-o", filepath.Join(t.TempDir(), "x.zip"), t.TempDir()}, &out, &errOut), "empty dir")
}
