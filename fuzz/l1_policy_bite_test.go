package fuzz

import (
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestFuzzL1PolicyBites proves FuzzL1Lifecycle's checker, which runs every
// seed under every eviction policy against the model of that policy,
// fails on a broken policy: one that evicts a chain's heads first, one
// that takes an object that is not evictable, and policies that quietly
// fall back to LRU.
func TestFuzzL1PolicyBites(t *testing.T) {
	bites(t, "FuzzL1Lifecycle", checkL1Lifecycle, []l1Bite{
		{"prefix evicts heads first", everywhere(mutant.VariantHeadsFirst), "policy prefix"},
		{"eviction takes a locked object", everywhere(mutant.VariantEvictsLocked), "evicted"},
		{"S3-FIFO is LRU", everywhere(mutant.VariantS3FIFOIsLRU), "policy s3fifo"},
		{"prefix is LRU", everywhere(mutant.VariantPrefixIsLRU), "policy prefix"},
		{"the Partial hint is ignored", everywhere(mutant.VariantPartialIgnored), "policy"},
	})
}
