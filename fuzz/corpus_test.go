package fuzz

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/fuzzcorpus"
)

const corpusHeader = fuzzcorpus.Header

// marshalSeed renders one []byte input in the go test fuzz v1 format.
func marshalSeed(data []byte) []byte { return fuzzcorpus.File(data) }

// unmarshalSeed parses a corpus file holding one []byte argument. It
// accepts what marshalSeed and the go command write: []byte("...") with a
// Go string literal.
func unmarshalSeed(file []byte) ([]byte, error) {
	rest, ok := bytes.CutPrefix(file, []byte(corpusHeader))
	if !ok {
		return nil, fmt.Errorf("missing %q header", strings.TrimSpace(corpusHeader))
	}
	line := strings.TrimSpace(string(rest))
	lit, ok := strings.CutPrefix(line, "[]byte(")
	if !ok || !strings.HasSuffix(lit, ")") || strings.Contains(line, "\n") {
		return nil, fmt.Errorf("want exactly one []byte argument, got %q", line)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	if err != nil {
		return nil, fmt.Errorf("bad literal: %w", err)
	}
	return []byte(s), nil
}

// corpus returns every committed input of target, named seeds and
// crashers alike, sorted by file name.
func corpus(t testing.TB, target string) []seed {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("corpus of %s: %v", target, err)
	}
	var out []seed
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		file, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		data, err := unmarshalSeed(file)
		if err != nil {
			t.Fatalf("%s/%s: %v", target, e.Name(), err)
		}
		out = append(out, seed{name: e.Name(), data: data})
	}
	if len(out) == 0 {
		t.Fatalf("corpus of %s is empty", target)
	}
	return out
}

// TestSeedCorpus keeps testdata/fuzz in step with the named seeds: every
// named seed must be committed with exactly its current bytes. With
// KVALLOC_UPDATE_CORPUS=1 it rewrites the files instead.
func TestSeedCorpus(t *testing.T) {
	update := os.Getenv("KVALLOC_UPDATE_CORPUS") == "1"
	targets := make([]string, 0, len(seedSets))
	for target := range seedSets {
		targets = append(targets, target)
	}
	slices.Sort(targets)
	for _, target := range targets {
		seeds := make([]fuzzcorpus.Seed, len(seedSets[target]))
		for i, s := range seedSets[target] {
			seeds[i] = fuzzcorpus.Seed{Name: s.name, Data: s.data}
		}
		for _, err := range fuzzcorpus.Sync(filepath.Join("testdata", "fuzz", target), seeds, update) {
			t.Error(err)
		}
	}
}

func TestSeedFormatRoundTrip(t *testing.T) {
	for _, data := range [][]byte{nil, {}, {0}, []byte("0&"), {0xff, '"', '\\', '\n', 0x80}} {
		got, err := unmarshalSeed(marshalSeed(data))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("round trip of %q gave %q", data, got)
		}
	}
}
