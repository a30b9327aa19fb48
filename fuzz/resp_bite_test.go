package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
	"github.com/kvalloc/kvalloc/l2"
)

// TestFuzzRESPReplyBites proves FuzzRESPReply's check fails, with a
// committed seed, on a reader that ignores its bound (and so accepts a
// bulk of any length a peer announces), and passes every committed input
// on the real reader.
func TestFuzzRESPReplyBites(t *testing.T) {
	seeds := corpus(t, "FuzzRESPReply")
	for _, s := range seeds {
		if err := checkRESP(s.data, l2.NewRESPReader); err != nil {
			t.Fatalf("the real reader fails seed %s: %v", s.name, err)
		}
	}
	for _, s := range seeds {
		if err := checkRESP(s.data, mutant.RESPNoBound); err != nil && strings.Contains(err.Error(), "protocol") {
			t.Logf("caught by seed %s: %v", s.name, err)
			return
		}
	}
	t.Fatal("no seed makes the check catch a reader that ignores its bound")
}
