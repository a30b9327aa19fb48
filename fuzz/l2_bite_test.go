package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
	"github.com/kvalloc/kvalloc/l2"
)

// TestFuzzL2ValueBites proves FuzzL2Value's check fails, with a committed
// seed, on a decoder that skips the payload's checksum and so serves a
// value whose bytes were changed in the store; and passes on the real one.
func TestFuzzL2ValueBites(t *testing.T) {
	seeds := corpus(t, "FuzzL2Value")
	for _, s := range seeds {
		if err := checkL2Value(s.data, l2.Unauthenticated, mutant.L2SkipChecksum); err != nil && strings.Contains(err.Error(), "not Encode's") {
			t.Logf("caught by seed %s: %v", s.name, err)
			return
		}
	}
	t.Fatal("no seed makes the check catch a decoder that skips the checksum")
}

// TestFuzzL2ValueMACBites proves FuzzL2Value's check fails, with a
// committed seed, on a decoder that checks everything the public format
// lets anyone compute but not the MACs (mutant.L2SkipMAC), and so serves
// a forgery; and that no seed fails the real codec with the secret.
func TestFuzzL2ValueMACBites(t *testing.T) {
	mac := fuzzCodecs()[1]
	caught := ""
	for _, s := range corpus(t, "FuzzL2Value") {
		if err := checkL2Value(s.data, mac, mac.Decode); err != nil {
			t.Fatalf("seed %s fails the real codec: %v", s.name, err)
		}
		if err := checkL2Value(s.data, mac, mutant.L2SkipMAC); err != nil && strings.Contains(err.Error(), "not Encode's") && caught == "" {
			caught = s.name
			t.Logf("caught by seed %s: %v", s.name, err)
		}
	}
	if caught == "" {
		t.Fatal("no seed makes the check catch a decoder that skips the MAC")
	}
}
