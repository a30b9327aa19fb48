package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestFuzzL2ValueBites proves FuzzL2Value's check fails, with a committed
// seed, on a decoder that skips the payload's checksum and so serves a
// value whose bytes were changed in the store; and passes on the real one.
func TestFuzzL2ValueBites(t *testing.T) {
	seeds := corpus(t, "FuzzL2Value")
	for _, s := range seeds {
		if err := checkL2Value(s.data, mutant.L2SkipChecksum); err != nil && strings.Contains(err.Error(), "not Encode's") {
			t.Logf("caught by seed %s: %v", s.name, err)
			return
		}
	}
	t.Fatal("no seed makes the check catch a decoder that skips the checksum")
}
