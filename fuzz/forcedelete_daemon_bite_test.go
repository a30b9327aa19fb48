//go:build linux

package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestFuzzDaemonForceDeleteBites proves FuzzDaemonOwnership's check fails
// on a daemon whose forced delete frees another connection's locked block
// at once, with some committed seed.
func TestFuzzDaemonForceDeleteBites(t *testing.T) {
	for _, s := range corpus(t, "FuzzDaemonOwnership") {
		if !strings.HasPrefix(s.name, "force-delete") {
			continue
		}
		setup, ops := decodeDaemonOps(s.data)
		if err := checkDaemon(setup, ops, mutant.VariantDaemonForceDeleteFreesAtOnce); err != nil && strings.Contains(err.Error(), "in no object") {
			t.Logf("caught by seed %s: %v", s.name, err)
			return
		}
	}
	t.Fatal("no force-delete seed of FuzzDaemonOwnership catches a forced delete that frees a locked block at once")
}
