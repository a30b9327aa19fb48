package fuzz

import (
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestFuzzForceDeleteBites proves the L1 targets' checks fail on a
// manager whose forced delete frees a locked block at once: both see the
// blocks the model holds for the deleted locks' holders missing from the
// manager's quarantined bytes.
func TestFuzzForceDeleteBites(t *testing.T) {
	bitesFirst(t, "FuzzL1Lifecycle", "force-delete", checkL1Lifecycle, []l1Bite{
		{"forced delete frees at once", everywhere(mutant.VariantForceDeleteFreesAtOnce), "blocks quarantined"},
	})
	bitesFirst(t, "FuzzReserveWrite", "force-delete", checkReserveWrite, []l1Bite{
		{"forced delete frees at once", everywhere(mutant.VariantForceDeleteFreesAtOnce), "blocks quarantined"},
	})
}
