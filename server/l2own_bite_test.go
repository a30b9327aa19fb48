//go:build linux

package server_test

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/daemoncheck"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
)

// ownL2Ops are runs of the ownership model with an L2 tier
// (daemoncheck.Setup.L2): a copy to L2 after a finish, and a prefetch
// whose value is evicted from L2 before its load.
var ownL2Ops = map[string][]daemoncheck.Op{
	"copy": {
		{Kind: daemoncheck.OpReserveWrite, Keys: []int{0, 1}, Size: daemoncheck.Unit, Mode: l1.ModeAll},
		{Kind: daemoncheck.OpFinishWrite, Keys: []int{0, 1}},
		{Kind: daemoncheck.OpReserveReadPrefix, Conn: 1, Keys: []int{0, 1}, Locks: 1},
	},
	"evicted-before-load": {
		{Kind: daemoncheck.OpReserveWrite, Keys: []int{5, 6, 7}, Size: daemoncheck.Unit, Mode: l1.ModeAll},
		{Kind: daemoncheck.OpFinishWrite, Keys: []int{5, 6, 7}},
		{Kind: daemoncheck.OpDelete, Keys: []int{5, 6, 7}},
		{Kind: daemoncheck.OpLookup, Conn: 1, Keys: []int{5, 6, 7}, Prefetch: true},
		{Kind: daemoncheck.OpFinishWrite, Conn: 2, Keys: []int{5, 6, 7}, From: daemoncheck.LeaseDaemon},
		{Kind: daemoncheck.OpEvictL2, Keys: []int{6}},
		{Kind: daemoncheck.OpLoad},
		{Kind: daemoncheck.OpReserveReadPrefix, Conn: 2, Keys: []int{5, 6, 7}, Locks: 1},
	},
}

func runOwnL2(t *testing.T, ops []daemoncheck.Op, bug func(*server.Server)) error {
	t.Helper()
	s, err := daemoncheck.New(daemoncheck.Setup{Units: 16, L2: true}, daemoncheck.Variant{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if bug != nil {
		bug(s.Server)
	}
	return s.Run(ops)
}

// TestOwnershipModelL2: the daemon with an L2 tier agrees with the model
// of its own locks on the runs of ownL2Ops.
func TestOwnershipModelL2(t *testing.T) {
	for name, ops := range ownL2Ops {
		if err := runOwnL2(t, ops, nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestOwnershipModelL2Bites: the model of the daemon's own locks catches
// a copy to L2 that never releases its read lock (recorded in the
// daemon's ledger, so the daemon's own Check agrees with l1), and a
// prefetch that finishes a key whose value was not loaded (its block
// readable, unverified).
func TestOwnershipModelL2Bites(t *testing.T) {
	for _, c := range []struct {
		name, run, want string
		bug             func(*server.Server)
	}{
		{"a copy keeps its read lock", "copy", "read locks of its own", server.L2PutKeepsRead},
		{"a prefetch publishes an unloaded key", "evicted-before-load", "model", server.L2PublishUnchecked},
	} {
		err := runOwnL2(t, ownL2Ops[c.run], c.bug)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: the model did not catch it: %v", c.name, err)
			continue
		}
		t.Logf("%s: caught: %v", c.name, err)
	}
}
