//go:build libfuzzer_layout

package main

// This file runs only where the module requires go-118-fuzz-build's
// testing package, as .clusterfuzzlite/build.sh makes it do in its copy of
// the tree; .clusterfuzzlite/libfuzzer.sh runs it there after the build.

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	fb "github.com/AdamKorcz/go-118-fuzz-build/testing"
)

// harness returns the []byte the built libFuzzer harness hands a
// one-[]byte target for the input in, and whether it calls the target.
func harness(in []byte) (got []byte, called bool) {
	f := &fb.F{Data: in, T: fb.NewT()}
	defer f.CleanupTempDirs()
	f.Fuzz(func(t *fb.T, data []byte) {
		called = true
		got = bytes.Clone(data)
	})
	return got, called
}

// TestLayoutMatchesBuilder checks the consumer layout against the builder's
// own decoding: every committed seed of every target (fuzz/targets.sh)
// reaches its target byte for byte, and DecodeInput, which turns a crash
// back into a Go corpus file, agrees with the harness on random inputs,
// including whether it runs the target at all.
func TestLayoutMatchesBuilder(t *testing.T) {
	out, err := exec.Command("bash", "../../fuzz/targets.sh").Output()
	if err != nil {
		t.Fatalf("fuzz/targets.sh: %v", err)
	}
	seeds := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, target, _ := strings.Cut(line, " ")
		corpus := filepath.Join("../..", dir, "testdata", "fuzz", target)
		entries, err := os.ReadDir(corpus)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			file, err := os.ReadFile(filepath.Join(corpus, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			vals, err := Decode(file)
			if err != nil {
				t.Fatalf("%s/%s: %v", target, e.Name(), err)
			}
			raw, err := Encode(vals, "consumer")
			if err != nil {
				t.Fatalf("%s/%s: %v", target, e.Name(), err)
			}
			want := vals[0].([]byte)
			got, called := harness(raw)
			if len(want) == 0 {
				if called {
					t.Errorf("%s/%s: the harness ran an empty seed as %q", target, e.Name(), got)
				}
				continue
			}
			if !called || !bytes.Equal(got, want) {
				t.Errorf("%s/%s: the harness passed %d bytes (called %v), want the seed's %d", target, e.Name(), len(got), called, len(want))
			}
			seeds++
		}
	}
	if seeds == 0 {
		t.Fatal("no non-empty seed checked")
	}
	t.Logf("%d seeds reach their target exactly", seeds)

	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		in := make([]byte, rng.IntN(64))
		for j := range in {
			in[j] = byte(rng.Uint32())
		}
		if i%4 == 0 && len(in) >= 4 { // lengths near the bytes left
			copy(in, []byte{0, 0, 0, byte(len(in) - 4 + rng.IntN(3) - 1)})
		}
		got, called := harness(in)
		dec, err := DecodeInput(in, "consumer")
		if called != (err == nil) || (called && !bytes.Equal(got, dec)) {
			t.Fatalf("input %x: the harness gives %x (called %v), DecodeInput %x (%v)", in, got, called, dec, err)
		}
	}
}
