package proptest

import (
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// The eviction state machine: the L1 state machine's model and checks,
// with commands drawn so that evictions choose among many candidates, which
// is where the policies differ. Pools of 8 to 24 units, one-unit objects
// over 16 keys, on-demand eviction on, locks that never lapse, and mostly
// writes, reads, touches and EvictTo calls.

// genPolicySetup draws a small full-able pool under every placement and
// eviction policy.
func genPolicySetup() gopter.Gen {
	return gopter.CombineGens(
		gen.IntRange(8, 24),
		gen.OneConstOf(allocator.ContiguousFirst, allocator.Scattered, allocator.Contiguous),
		gen.OneConstOf(l1.EvictLRU, l1.EvictPrefix, l1.EvictS3FIFO),
		gen.Bool(),
	).Map(func(v []any) l1check.Setup {
		return l1check.Setup{Units: v[0].(int), Align: 64, Placement: v[1].(allocator.Placement),
			Eviction: v[2].(l1.EvictionPolicy), EvictOnDemand: v[3].(bool), WriteTTL: l1.NoExpiry, ReadTTL: l1.NoExpiry}
	})
}

// genPolicyCmd draws the commands that move objects in and out of the
// policies' structures, and the evictions that read them, with objects of
// one and two units.
func genPolicyCmd(s commands.State) gopter.Gen { return genEvictCmd(2) }

// genEvictCmd is genPolicyCmd with objects of 1 to units units.
func genEvictCmd(units int) gopter.Gen {
	kind := gen.Weighted([]gen.WeightedGen{
		{Weight: 5, Gen: gen.Const(l1check.OpReserveWrite)}, {Weight: 5, Gen: gen.Const(l1check.OpFinishWrite)},
		{Weight: 3, Gen: gen.Const(l1check.OpReserveRead)}, {Weight: 3, Gen: gen.Const(l1check.OpFinishRead)},
		{Weight: 3, Gen: gen.Const(l1check.OpTouch)}, {Weight: 3, Gen: gen.Const(l1check.OpEvictTo)},
		{Weight: 1, Gen: gen.Const(l1check.OpDelete)},
	})
	// Runs of keys, in order: chains, as a serving engine names them.
	keys := gopter.CombineGens(gen.IntRange(0, 15), gen.IntRange(1, 5)).Map(func(v []any) []int {
		ks := l1check.Keys(v[0].(int), v[1].(int))
		for i := range ks {
			ks[i] %= 16
		}
		return ks
	})
	// Chain positions: none, or from 0 with the last key partial or not.
	chain := gen.IntRange(0, 2)
	return gopter.CombineGens(kind, keys, gen.IntRange(1, units), gen.OneConstOf(0.0, 0.2, 0.4, 0.6, 0.8), gen.Bool(), gen.Bool(), chain).Map(func(v []any) commands.Command {
		op := l1check.Op{Kind: v[0].(l1check.OpKind), Keys: v[1].([]int), Size: int64(v[2].(int)) * 64, Locks: 1,
			Ratio: v[3].(float64), Observe: v[4].(bool), Mode: l1.ModeAll}
		if op.Kind == l1check.OpReserveWrite && v[5].(bool) {
			op.Temporary = make([]bool, len(op.Keys))
			op.Temporary[0] = true
		}
		op.Prefix = op.Kind == l1check.OpReserveRead && v[5].(bool)
		if c := v[6].(int); op.Kind == l1check.OpReserveWrite && c > 0 {
			op.Positions = make([]uint32, len(op.Keys))
			for i := range op.Positions {
				op.Positions[i] = uint32(i)
			}
			if c == 2 {
				op.Positions[len(op.Positions)-1] |= l1.Partial
			}
		}
		return l1Cmd{op}
	})
}

func policyCommands(v l1check.Variant) *commands.ProtoCommands {
	return evictCommands(v, genPolicySetup(), genPolicyCmd)
}

// evictCommands is the eviction state machine over systems with variant
// v, setups drawn by setups and commands by cmds.
func evictCommands(v l1check.Variant, setups gopter.Gen, cmds func(commands.State) gopter.Gen) *commands.ProtoCommands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(initial commands.State) commands.SystemUnderTest {
			return l1check.MustNew(initial.(*l1State).setup, v)
		},
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) { sut.(*l1check.System).Close() },
		InitialStateGen: setups.Map(func(setup l1check.Setup) *l1State {
			sys := l1check.MustNew(setup, l1check.Variant{})
			defer sys.Close()
			return &l1State{setup: sys.Setup, md: sys.Model, book: l1check.NewBook()}
		}),
		GenCommandFunc: cmds,
	}
}

// TestPropL1Policies: under every eviction policy, with and without
// on-demand eviction, the manager evicts what the model of that policy
// evicts, and stays equal to the model in everything else.
func TestPropL1Policies(t *testing.T) {
	check(t, commands.Prop(policyCommands(l1check.Variant{})), params(t, 300, 80))
}

// genMixedSetup draws a small pool under every placement, prefix strategy
// and eviction policy, always with on-demand eviction.
func genMixedSetup() gopter.Gen {
	return gopter.CombineGens(
		gen.IntRange(8, 24),
		gen.OneConstOf(allocator.ContiguousFirst, allocator.Scattered, allocator.Contiguous),
		gen.OneConstOf(l1.EvictLRU, l1.EvictPrefix, l1.EvictS3FIFO),
		gen.OneConstOf(baseline.OnePass, baseline.BinarySearch, baseline.None),
	).Map(func(v []any) l1check.Setup {
		return l1check.Setup{Units: v[0].(int), Align: 64, Placement: v[1].(allocator.Placement),
			Eviction: v[2].(l1.EvictionPolicy), Prefix: v[3].(baseline.Strategy), EvictOnDemand: true,
			WriteTTL: l1.NoExpiry, ReadTTL: l1.NoExpiry}
	})
}

// mixedCommands is the eviction state machine over pools of objects of 1
// to 3 units, with on-demand eviction: victims free slivers that objects
// of other sizes must merge with, so only an exact count of what each
// victim frees evicts what the model evicts.
func mixedCommands(v l1check.Variant) *commands.ProtoCommands {
	return evictCommands(v, genMixedSetup(), func(commands.State) gopter.Gen { return genEvictCmd(3) })
}

// TestPropL1MixedEviction: with objects of mixed sizes and on-demand
// eviction, under every placement, policy and prefix strategy, the manager
// evicts what the model evicts (the plain loop's victims), grants what it
// grants, and keeps every ReserveWrite contract, no extra victim included.
func TestPropL1MixedEviction(t *testing.T) {
	check(t, commands.Prop(mixedCommands(l1check.Variant{})), params(t, 200, 80))
}
