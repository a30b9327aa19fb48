//go:build linux

package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestFuzzDaemonOwnershipBites proves FuzzDaemonOwnership's check fails
// on a daemon whose disconnect forgets the read locks, with some committed
// seed.
func TestFuzzDaemonOwnershipBites(t *testing.T) {
	for _, s := range corpus(t, "FuzzDaemonOwnership") {
		setup, ops := decodeDaemonOps(s.data)
		if err := checkDaemon(setup, ops, mutant.VariantDisconnectForgetsReads); err != nil && strings.Contains(err.Error(), "in LRU order") {
			t.Logf("caught by seed %s: %v", s.name, err)
			return
		}
	}
	t.Fatal("no seed of FuzzDaemonOwnership catches a disconnect that forgets the read locks")
}
