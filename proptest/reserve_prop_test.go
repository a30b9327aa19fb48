package proptest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// scenario is a starting state, built by prep from an empty manager, and
// one ReserveWrite request sent to it.
type scenario struct {
	setup l1check.Setup
	prep  []l1check.Op
	req   l1check.Op
}

func (s scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "setup %v; prep:", s.setup)
	for _, op := range s.prep {
		fmt.Fprintf(&b, " %v;", op)
	}
	fmt.Fprintf(&b, " request: %v", s.req)
	return b.String()
}

// genSetup generates small pools (8 to 128 units of 64 bytes) under every
// placement, prefix strategy and eviction policy, sometimes with on-demand
// eviction.
func genSetup(evict bool) gopter.Gen {
	evictGen := gen.Const(false)
	if evict {
		evictGen = gen.Weighted([]gen.WeightedGen{{Weight: 4, Gen: gen.Const(false)}, {Weight: 1, Gen: gen.Const(true)}})
	}
	return gopter.CombineGens(
		gen.IntRange(8, 128),
		gen.OneConstOf(allocator.ContiguousFirst, allocator.Scattered, allocator.Contiguous),
		gen.OneConstOf(baseline.OnePass, baseline.BinarySearch, baseline.None),
		evictGen,
		gen.OneConstOf(l1.EvictLRU, l1.EvictPrefix, l1.EvictS3FIFO),
	).Map(func(v []any) l1check.Setup {
		return l1check.Setup{Units: v[0].(int), Align: 64, Placement: v[1].(allocator.Placement), Prefix: v[2].(baseline.Strategy),
			EvictOnDemand: v[3].(bool), Eviction: v[4].(l1.EvictionPolicy)}
	})
}

// genSize generates object sizes: mostly 1 to 8 units, sometimes unaligned.
func genSize() gopter.Gen {
	return gen.Weighted([]gen.WeightedGen{
		{Weight: 4, Gen: gen.Int64Range(1, 8).Map(func(u int64) int64 { return u * 64 })},
		{Weight: 1, Gen: gen.Int64Range(1, 600)},
	})
}

// genKeyRun generates a run of 1 to 8 consecutive keys among 0 to 40.
func genKeyRun() gopter.Gen {
	return gopter.CombineGens(gen.IntRange(0, 40), gen.IntRange(1, 8)).Map(func(v []any) []int {
		return l1check.Keys(v[0].(int), v[1].(int))
	})
}

// genPrepOp generates the operations that build a starting state:
// reservations of several sizes (fragmentation), commits, read locks,
// deletions (holes), aborts, temporary objects, and clock advances that let
// some locks lapse.
func genPrepOp() gopter.Gen { return genPrepOpWeighted(2) }

// genPrepOpWeighted is genPrepOp with reads of weight reads (of 19 - 2 +
// reads).
func genPrepOpWeighted(reads int) gopter.Gen {
	return gopter.CombineGens(
		gen.Weighted([]gen.WeightedGen{
			{Weight: 6, Gen: gen.Const(l1check.OpReserveWrite)}, {Weight: 4, Gen: gen.Const(l1check.OpFinishWrite)},
			{Weight: reads, Gen: gen.Const(l1check.OpReserveRead)}, {Weight: 3, Gen: gen.Const(l1check.OpDelete)},
			{Weight: 1, Gen: gen.Const(l1check.OpFinishWriteAndReserveRead)}, {Weight: 1, Gen: gen.Const(l1check.OpAbortWrite)},
			{Weight: 1, Gen: gen.Const(l1check.OpFinishRead)}, {Weight: 1, Gen: gen.Const(l1check.OpAdvance)},
		}),
		genKeyRun(), genSize(), gen.UInt32(), gen.IntRange(1, 3), gen.IntRange(0, 12),
	).Map(func(v []any) l1check.Op {
		op := l1check.Op{Kind: v[0].(l1check.OpKind), Keys: v[1].([]int), Size: v[2].(int64), Locks: v[4].(int)}
		if mask := v[3].(uint32); mask&1 != 0 {
			op.Temporary = make([]bool, len(op.Keys))
			for i := range op.Temporary {
				op.Temporary[i] = mask>>(1+i%8)&7 == 0 // one in eight temporary
			}
		}
		op.Advance = time.Duration(v[5].(int)) * 60 * time.Second // up to 720 s: past both TTLs
		op.Force = v[3].(uint32)&2 != 0
		return op
	})
}

// genRequest generates the ReserveWrite under test: 1 to 30 keys among 0
// to 40, so repeats and existing keys are common; every mode, mostly
// ModeAll; sometimes temporary flags; sizes as genSize, and now and then an
// object larger than any pool.
func genRequest() gopter.Gen {
	return gopter.CombineGens(
		gen.IntRange(1, 30).FlatMap(func(n any) gopter.Gen { return gen.SliceOfN(n.(int), gen.IntRange(0, 40)) }, nil),
		gen.Weighted([]gen.WeightedGen{{Weight: 30, Gen: genSize()}, {Weight: 1, Gen: gen.Const(int64(1 << 20))}}),
		gen.Weighted([]gen.WeightedGen{
			{Weight: 6, Gen: gen.Const(l1.ModeAll)}, {Weight: 2, Gen: gen.Const(l1.ModeNew)}, {Weight: 1, Gen: gen.Const(l1.ModeUpdate)},
		}),
		gen.UInt32(),
	).Map(func(v []any) l1check.Op {
		op := l1check.Op{Kind: l1check.OpReserveWrite, Keys: v[0].([]int), Size: v[1].(int64), Mode: v[2].(l1.Mode)}
		if mask := v[3].(uint32); mask&1 != 0 {
			op.Temporary = make([]bool, len(op.Keys))
			for i := range op.Temporary {
				op.Temporary[i] = mask>>(1+i%31)&1 != 0
			}
		}
		return op
	})
}

// genScenario combines the three; prep has up to MaxSize operations and
// shrinks by dropping operations.
func genScenario() gopter.Gen {
	return gopter.DeriveGen(
		func(setup l1check.Setup, prep []l1check.Op, req l1check.Op) scenario {
			return scenario{setup, prep, req}
		},
		func(s scenario) (l1check.Setup, []l1check.Op, l1check.Op) { return s.setup, s.prep, s.req },
		genSetup(true), gen.SliceOf(genPrepOp()), genRequest(),
	)
}

// reserveProp is the property "check holds for the ReserveWrite of every
// scenario", on systems built with variant v. The prep operations run on
// the manager alone; the check reads only the manager and the allocator.
func reserveProp(check func(*l1check.Observation) error, v l1check.Variant) gopter.Prop {
	return reservePropOf(genScenario(), check, v, nil)
}

// reservePropOf is reserveProp over the scenarios of scenarios, showing
// each system to prepared, when not nil, once its preparation ran.
func reservePropOf(scenarios gopter.Gen, check func(*l1check.Observation) error, v l1check.Variant, prepared func(*l1check.System)) gopter.Prop {
	return prop.ForAll(func(sc scenario) string {
		sys, err := l1check.New(sc.setup, v)
		if err != nil {
			return err.Error()
		}
		defer sys.Close()
		for _, op := range sc.prep {
			sys.Do(op)
		}
		if prepared != nil {
			prepared(sys)
		}
		o := sys.ObserveReserve(sc.req.Keys, sc.req.Temporary, sc.req.Size, sc.req.Mode, true)
		if err := check(o); err != nil {
			return fmt.Sprintf("%v: %v", o, err)
		}
		return ""
	}, scenarios)
}

// TestPropPrefixMaximality: the granted k equals the reference maximum
// (the allocator's Fit, or one extent's share under Contiguous placement)
// under any fragmentation, for every prefix strategy; all or nothing, one-key
// batches and objects larger than the pool are all or nothing.
func TestPropPrefixMaximality(t *testing.T) {
	check(t, reserveProp(l1check.CheckPrefixMaximal, l1check.Variant{}), params(t, 500, 40))
}

// TestPropRequestOrderLocking: exactly the first k needing keys, in request
// order, are write-locked with distinct blocks, re-locked keys keep theirs,
// no other key changed state, and listeners see exactly the granted keys.
func TestPropRequestOrderLocking(t *testing.T) {
	check(t, reserveProp(l1check.CheckRequestOrder, l1check.Variant{}), params(t, 500, 40))
}

// TestPropTailOOMStatuses: every needing key after the granted prefix gets
// OutOfMemory and holds nothing, and no other key gets OutOfMemory.
func TestPropTailOOMStatuses(t *testing.T) {
	check(t, reserveProp(l1check.CheckTailOOM, l1check.Variant{}), params(t, 500, 40))
}
