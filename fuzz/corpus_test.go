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
)

const corpusHeader = "go test fuzz v1\n"

// marshalSeed renders one []byte input in the go test fuzz v1 format.
func marshalSeed(data []byte) []byte {
	return fmt.Appendf(nil, "%s[]byte(%q)\n", corpusHeader, data)
}

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
		dir := filepath.Join("testdata", "fuzz", target)
		for _, s := range seedSets[target] {
			path := filepath.Join(dir, s.name)
			want := marshalSeed(s.data)
			if update {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%s: %v (run with KVALLOC_UPDATE_CORPUS=1 to write it)", path, err)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is stale (run with KVALLOC_UPDATE_CORPUS=1 to rewrite it)", path)
			}
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
