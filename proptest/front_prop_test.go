//go:build linux

package proptest

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/internal/reference/daemoncheck"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
	"github.com/kvalloc/kvalloc/l1"
)

// frontProps are the ReserveWrite properties that every front end runs.
var frontProps = []struct {
	name  string
	check func(*l1check.Observation) error
}{
	{"prefix-maximality", l1check.CheckPrefixMaximal},
	{"request-order-locking", l1check.CheckRequestOrder},
	{"tail-oom-statuses", l1check.CheckTailOOM},
	{"no-leak", l1check.CheckNoLeak},
}

// TestPropThroughDaemon: one suite, two front ends. The ReserveWrite
// properties above, run again with a daemon between them and the manager:
// the starting state is built and the request sent through a client
// connection (package client, over a Unix socket), and the checks read the
// daemon's manager and allocator (daemoncheck.Front).
func TestPropThroughDaemon(t *testing.T) {
	for _, c := range frontProps {
		t.Run(c.name, func(t *testing.T) {
			check(t, reserveProp(c.check, daemoncheck.Front()), params(t, 150, 40))
		})
	}
}

// TestPropThroughDaemonL2: one suite, three front ends. The same
// properties with the daemon's L2 tier on, over a real redis-server (one
// plain server for all the cases, each daemon under a prefix of its own:
// a cluster would only add its slot map to every case, and the properties
// are about one daemon's answers), and pools of 8 to 32 blocks
// (genScenarioL2): every
// finish is copied to L2, and every read in the starting state's
// preparation is an engine's lookup and prefetch first, so that a key L1
// lost (deleted, evicted) is loaded back from L2 into the pool, evicting
// others (daemoncheck.FrontL2). The properties must hold when the state
// they judge was built from the cluster's bytes; the test counts the
// cases whose preparation loaded keys from L2, and fails if none did.
func TestPropThroughDaemonL2(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	for _, c := range frontProps {
		t.Run(c.name, func(t *testing.T) {
			var cases, loaded, keys atomic.Uint64
			prepared := func(sys *l1check.System) {
				cases.Add(1)
				if n, _ := daemoncheck.FrontL2Loads(sys.M); n > 0 {
					loaded.Add(1)
					keys.Add(n)
				}
			}
			check(t, reservePropOf(genScenarioL2(), c.check, daemoncheck.FrontL2(srv.URL()), prepared), params(t, 150, 40))
			t.Logf("%d cases, %d of them with keys loaded from L2 (%d keys)", cases.Load(), loaded.Load(), keys.Load())
			if loaded.Load() == 0 {
				t.Fatalf("no case of %d loaded a key from L2: the front end with L2 tested nothing of it", cases.Load())
			}
		})
	}
}

// genScenarioL2 is genScenario for an L1 that loses keys L2 keeps: pools
// of 8 to 32 units, on-demand eviction half the time, and a preparation of
// engine-like steps (genStepL2) mixed with genPrepOp's single calls.
func genScenarioL2() gopter.Gen {
	setup := gopter.CombineGens(genSetup(true), gen.IntRange(8, 32), gen.Bool()).Map(func(v []any) l1check.Setup {
		s := v[0].(l1check.Setup)
		s.Units, s.EvictOnDemand = v[1].(int), s.EvictOnDemand || v[2].(bool)
		return s
	})
	prep := gen.SliceOf(genStepL2()).Map(func(steps [][]l1check.Op) []l1check.Op {
		var ops []l1check.Op
		for _, s := range steps {
			ops = append(ops, s...)
		}
		return ops
	})
	return gopter.DeriveGen(
		func(setup l1check.Setup, prep []l1check.Op, req l1check.Op) scenario {
			return scenario{setup, prep, req}
		},
		func(s scenario) (l1check.Setup, []l1check.Op, l1check.Op) { return s.setup, s.prep, s.req },
		setup, prep, genRequest(),
	)
}

// genStepL2 generates one step of an engine over a small L1, on runs of 1
// to 6 of 16 keys, so that steps meet: store a run (reserve and finish:
// copied to L2), read a run and release it, read one and hold it, delete a
// run, or one of genPrepOp's calls.
func genStepL2() gopter.Gen {
	run := gopter.CombineGens(gen.IntRange(0, 15), gen.IntRange(1, 6)).Map(func(v []any) []int {
		return l1check.Keys(v[0].(int), v[1].(int))
	})
	return gopter.CombineGens(gen.IntRange(0, 9), run, genSize(), gen.IntRange(1, 3), genPrepOp()).Map(func(v []any) []l1check.Op {
		keys, size, locks := v[1].([]int), v[2].(int64), v[3].(int)
		switch k := v[0].(int); {
		case k < 3:
			return []l1check.Op{{Kind: l1check.OpReserveWrite, Keys: keys, Size: size, Mode: l1.ModeAll}, {Kind: l1check.OpFinishWrite, Keys: keys}}
		case k < 6:
			return []l1check.Op{{Kind: l1check.OpReserveRead, Keys: keys, Locks: locks, Prefix: k == 5}, {Kind: l1check.OpFinishRead, Keys: keys, Locks: locks}}
		case k == 6:
			return []l1check.Op{{Kind: l1check.OpReserveRead, Keys: keys[:1], Locks: locks}}
		case k == 7:
			return []l1check.Op{{Kind: l1check.OpDelete, Keys: keys}}
		}
		return []l1check.Op{v[4].(l1check.Op)}
	})
}

// TestPropThroughDaemonBites: through the daemon the properties still
// bite. The manager inside the daemon is the real one, so the broken part
// is the front end's own path: a client that hands back a reservation's
// results in reverse order (mutant.VariantDaemonAnswersReversed) breaks
// request-order locking and the tail's statuses, through the front end
// with L2 too.
func TestPropThroughDaemonBites(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
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
		t.Run(c.name+"/l2", func(t *testing.T) {
			prop := reservePropOf(genScenarioL2(), c.check, mutant.VariantDaemonL2AnswersReversed(srv.URL()), nil)
			bad, report := fails(prop, 1, 300, 40)
			if !bad || !strings.Contains(report, c.want) {
				t.Fatalf("through the front end with L2, the property did not catch a client that reverses the results: %s", report)
			}
		})
	}
}
