package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestFuzzFrameDecoderBites proves FuzzFrameDecoder's check fails on each
// broken decoder with some committed seed.
func TestFuzzFrameDecoderBites(t *testing.T) {
	seeds := corpus(t, "FuzzFrameDecoder")
	for _, c := range []struct {
		name string
		dec  func() frameDecoder
		want string
	}{
		{"drop-last-key", func() frameDecoder { return &mutant.DropLastKey{} }, "leases for"},
		{"internal-refusals", func() frameDecoder { return &mutant.InternalRefusals{} }, "refused with code INTERNAL"},
		{"borrow-writes", func() frameDecoder { return &mutant.BorrowWrites{} }, "changed with the frame's bytes"},
		{"handles-in-v1", func() frameDecoder { return &mutant.HandlesInV1{} }, "a version 1 decoder accepted a call by handle"},
		{"result-handles-in-v1", func() frameDecoder { return &mutant.HandlesInV1{} }, "accepted result 0's handle"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range seeds {
				if err := checkFrame(s.data, c.dec()); err != nil && strings.Contains(err.Error(), c.want) {
					t.Logf("caught by seed %s: %v", s.name, err)
					return
				}
			}
			t.Fatalf("no seed makes the check report %q", c.want)
		})
	}
}
