package proptest

import (
	"testing"

	"github.com/leanovate/gopter/commands"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestPropL1PolicyBites proves the eviction state machine, whose setups
// draw an eviction policy and whose model follows that policy, fails on a
// broken policy.
func TestPropL1PolicyBites(t *testing.T) {
	assertFails(t, []bite{
		{"prefix evicts heads first", commands.Prop(policyCommands(mutant.VariantHeadsFirst))},
		{"eviction takes a locked object", commands.Prop(policyCommands(mutant.VariantEvictsLocked))},
		{"S3-FIFO is LRU", commands.Prop(policyCommands(mutant.VariantS3FIFOIsLRU))},
		{"prefix is LRU", commands.Prop(policyCommands(mutant.VariantPrefixIsLRU))},
		{"the Partial hint is ignored", commands.Prop(policyCommands(mutant.VariantPartialIgnored))},
	}, 300, 60)
}

// TestPropL1MixedEvictionBites proves the mixed-size eviction state
// machine fails on an eviction that misses merges, the exactness bug.
func TestPropL1MixedEvictionBites(t *testing.T) {
	assertFails(t, []bite{
		{"eviction misses merges", commands.Prop(mixedCommands(mutant.VariantMergeBlind))},
	}, 200, 60)
}
