package proptest

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"

	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/internal/reference/l1ref"
	"github.com/kvalloc/kvalloc/l1"
)

// l1State is the model of the state machine: the reference manager (a copy
// per NextState), the Setup the system was built with, and the Outcome the
// model predicts for the command just applied.
type l1State struct {
	setup l1check.Setup
	md    *l1ref.Manager[l1check.Key]
	book  *l1check.Book // the leases each actor got from the model
	want  l1check.Outcome
}

// l1Cmd is one Manager call or clock advance. Keys are small integers, so
// commands refer to the same few objects again and again.
type l1Cmd struct{ op l1check.Op }

func (c l1Cmd) String() string {
	if c.op.Observe {
		return c.op.String() + "+observe"
	}
	return c.op.String()
}

func (c l1Cmd) Run(sut commands.SystemUnderTest) commands.Result {
	return sut.(*l1check.System).Do(c.op)
}

func (c l1Cmd) NextState(state commands.State) commands.State {
	s := state.(*l1State)
	next := &l1State{setup: s.setup, md: s.md.Clone(), book: s.book.Clone()}
	next.want = l1check.ModelDo(next.md, next.book, c.op)
	return next
}

func (c l1Cmd) PreCondition(commands.State) bool { return true }

func (c l1Cmd) PostCondition(state commands.State, result commands.Result) *gopter.PropResult {
	if err := l1check.CompareOutcome(result.(l1check.Outcome), state.(*l1State).want); err != nil {
		return gopter.NewPropResult(false, fmt.Sprintf("%v: %v", c, err))
	}
	return gopter.NewPropResult(true, "")
}

// genL1Cmd generates every Manager method over keys 0 to 11, by four
// actors that each present their own leases (rarely a zero or a short
// lease list), lock counts (rarely invalid ones), sizes as genSize (rarely
// invalid, or with mismatched temporary flags), and clock steps that land
// just before, on and just after each TTL, jump back, or jump by up to the
// int64 range either way.
func genL1Cmd(state commands.State) gopter.Gen {
	s := state.(*l1State)
	w, r := s.setup.WriteTTL, s.setup.ReadTTL
	advances := []time.Duration{time.Second, r / 2, r - time.Second, r, r + time.Second, w - time.Second, w, w + time.Second, 2 * w,
		-time.Second, -w, math.MaxInt64, math.MinInt64, 200 * 365 * 24 * time.Hour}
	kind := gen.Weighted([]gen.WeightedGen{
		{Weight: 6, Gen: gen.Const(l1check.OpReserveWrite)}, {Weight: 4, Gen: gen.Const(l1check.OpFinishWrite)},
		{Weight: 1, Gen: gen.Const(l1check.OpFinishWriteAndReserveRead)}, {Weight: 1, Gen: gen.Const(l1check.OpAbortWrite)},
		{Weight: 4, Gen: gen.Const(l1check.OpReserveRead)}, {Weight: 1, Gen: gen.Const(l1check.OpUnsafeRead)},
		{Weight: 3, Gen: gen.Const(l1check.OpFinishRead)}, {Weight: 1, Gen: gen.Const(l1check.OpDelete)},
		{Weight: 1, Gen: gen.Const(l1check.OpTouch)}, {Weight: 1, Gen: gen.Const(l1check.OpIsEvictable)},
		{Weight: 1, Gen: gen.Const(l1check.OpLen)}, {Weight: 2, Gen: gen.Const(l1check.OpAdvance)},
		{Weight: 1, Gen: gen.OneConstOf(l1check.OpClear, l1check.OpEvictTo)},
	})
	keys := gen.IntRange(1, 6).FlatMap(func(n any) gopter.Gen { return gen.SliceOfN(n.(int), gen.IntRange(0, 11)) }, nil)
	locks := gen.Weighted([]gen.WeightedGen{{Weight: 20, Gen: gen.IntRange(1, 3)}, {Weight: 1, Gen: gen.OneConstOf(0, 128, 129)}})
	size := gen.Weighted([]gen.WeightedGen{{Weight: 30, Gen: genSize()}, {Weight: 1, Gen: gen.OneConstOf(int64(0), int64(-64), int64(1<<20))}})
	return gopter.CombineGens(kind, keys, size, locks, gen.UInt32(), gen.IntRange(0, len(advances)-1),
		gen.OneConstOf(0.0, 0.25, 0.5, 0.9, 1.0)).Map(func(v []any) commands.Command {
		op := l1check.Op{Kind: v[0].(l1check.OpKind), Keys: v[1].([]int), Size: v[2].(int64), Locks: v[3].(int)}
		bits := v[4].(uint32)
		op.Mode = l1.Mode(bits % 4 % 3) // ModeAll twice as often
		if bits&0x10 != 0 {
			op.Temporary = make([]bool, len(op.Keys))
			for i := range op.Temporary {
				op.Temporary[i] = bits>>(5+i)&3 == 0
			}
		}
		if bits&0x7f00 == 0x100 {
			op.Temporary = append(op.Temporary, false) // a flag too many: rejected
		}
		op.Force = bits&0x8000 != 0
		op.Observe = bits&0x30000 != 0
		op.Actor = int(bits >> 18 & 3)
		switch bits >> 20 & 0x1f {
		case 0:
			op.Lease = l1check.LeaseZero
		case 1:
			op.Lease = l1check.LeaseShort
		}
		op.Prefix = bits&(1<<25) != 0 // ReserveRead as ReserveReadPrefix
		op.Advance = advances[v[5].(int)]
		op.Ratio = v[6].(float64)
		return l1Cmd{op}
	})
}

// l1Commands builds the state-machine test over systems with variant v.
func l1Commands(v l1check.Variant) *commands.ProtoCommands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(initial commands.State) commands.SystemUnderTest {
			return l1check.MustNew(initial.(*l1State).setup, v)
		},
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) { sut.(*l1check.System).Close() },
		InitialStateGen: gopter.CombineGens(genSetup(true), gen.IntRange(0, 4), gen.Bool()).Map(func(v []any) *l1State {
			setup := v[0].(l1check.Setup)
			setup.Quarantine = v[2].(bool) // lapsed writes keep their blocks
			switch v[1].(int) {
			case 0, 1: // short TTLs, so that advances matter at every size
				setup.WriteTTL, setup.ReadTTL = 10*time.Second, 5*time.Second
			case 2:
				setup.WriteTTL, setup.ReadTTL = l1.DefaultWriteTTL, l1.DefaultReadTTL
			case 3: // the int64 limit: never lapses
				setup.WriteTTL, setup.ReadTTL = l1.NoExpiry, l1.NoExpiry
			case 4:
				setup.WriteTTL, setup.ReadTTL = 10*time.Second, l1.NoExpiry
			}
			// The model starts from the same Setup New uses.
			sys := l1check.MustNew(setup, l1check.Variant{})
			defer sys.Close()
			return &l1State{setup: sys.Setup, md: sys.Model, book: l1check.NewBook()}
		}),
		GenCommandFunc: genL1Cmd,
	}
}

// TestPropL1StateMachine: every Manager method, in any order, with clock
// advances across both TTLs, with and without the quarantine of lapsed
// writes, returns what the reference model returns and leaves the state
// the model predicts: per-key results and blocks, errors, usage, the
// quarantine, counters, every object's state in LRU order, and the free
// extents.
func TestPropL1StateMachine(t *testing.T) {
	check(t, commands.Prop(l1Commands(l1check.Variant{})), params(t, 300, 80))
}
