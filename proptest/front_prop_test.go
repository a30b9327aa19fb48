//go:build linux

package proptest

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/internal/reference/daemoncheck"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestPropThroughDaemon: one suite, two front ends. The ReserveWrite
// properties above, run again with a daemon between them and the manager:
// the starting state is built and the request sent through a client
// connection (package client, over a Unix socket), and the checks read the
// daemon's manager and allocator (daemoncheck.Front).
func TestPropThroughDaemon(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(*l1check.Observation) error
	}{
		{"prefix-maximality", l1check.CheckPrefixMaximal},
		{"request-order-locking", l1check.CheckRequestOrder},
		{"tail-oom-statuses", l1check.CheckTailOOM},
		{"no-leak", l1check.CheckNoLeak},
	} {
		t.Run(c.name, func(t *testing.T) {
			check(t, reserveProp(c.check, daemoncheck.Front()), params(t, 150, 40))
		})
	}
}

// TestPropThroughDaemonBites: through the daemon the properties still
// bite. The manager inside the daemon is the real one, so the broken part
// is the front end's own path: a client that hands back a reservation's
// results in reverse order (mutant.VariantDaemonAnswersReversed) breaks
// request-order locking and the tail's statuses.
func TestPropThroughDaemonBites(t *testing.T) {
	for _, c := range []struct {
		name  string
		check func(*l1check.Observation) error
		want  string // a phrase of the failure
	}{
		{"request-order-locking", l1check.CheckRequestOrder, "not the first k in request order"},
		{"tail-oom-statuses", l1check.CheckTailOOM, "OUT_OF_MEMORY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad, report := fails(reserveProp(c.check, mutant.VariantDaemonAnswersReversed), 1, 300, 40)
			if !bad || !strings.Contains(report, c.want) {
				t.Fatalf("the property did not catch a client that reverses the results: %s", report)
			}
		})
	}
}
