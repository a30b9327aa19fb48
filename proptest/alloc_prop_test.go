package proptest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
)

// The allocator under test: 128 units of 64 bytes.
const (
	pAlign    = 64
	pUnits    = 128
	pCapacity = pAlign * pUnits
)

// allocUnderTest is what the checks call and observes; the broken variants
// in internal/reference/mutant satisfy it too.
type allocUnderTest = allocref.UnderTest

// propPool is the pool a property runs on: its alignment and capacity, the
// unit its object sizes come in, and how far batches scale.
type propPool struct {
	align, capacity, unit int64
	batch                 int  // batches of 0 to 20×batch objects
	noReserve             bool // a MAP_NORESERVE mapping instead of the heap
}

var (
	// smallPool: 128 units of 64 bytes, objects of 1 to 16 units.
	smallPool = &propPool{align: pAlign, capacity: pCapacity, unit: pAlign, batch: 1}
	// largePool is production scale: 5700 × 8 MiB = 44.5 GiB at 4 KiB
	// alignment, objects of 1 to 16 MiB (8 MiB among them), batches of up
	// to 6000, over a MAP_NORESERVE mapping that costs no memory.
	largePool = &propPool{align: allocator.DefaultAlign, capacity: 5700 << 23, unit: 1 << 20, batch: 300, noReserve: true}
)

func newPropAllocator() *allocator.Allocator { return smallPool.newAllocator() }

func (g *propPool) newAllocator() *allocator.Allocator {
	var r allocator.Region
	var err error
	if g.noReserve {
		r, err = hostmem.NewMmapRegion(g.capacity, hostmem.MmapOptions{NoReserve: true})
	} else {
		r, err = hostmem.NewHeapRegion(g.capacity)
	}
	if err != nil {
		panic(err)
	}
	a, err := allocator.New(r, allocator.Options{Align: g.align})
	if err != nil {
		panic(err)
	}
	return a
}

// allocSUT is the system under test: the allocator and its live blocks in
// allocation order, which commands refer to by index.
type allocSUT struct {
	a           allocUnderTest
	live, stale []allocator.Block
}

// allocState is the model: a bitmap allocator with the documented
// placement policy, the same live list, and the outcome it predicts for
// the command just applied. Every NextState works on a copy.
type allocState struct {
	ref         *allocref.Alloc
	live, stale []allocator.Block
	want        allocOutcome
}

func (s *allocState) clone() *allocState {
	return &allocState{ref: s.ref.Clone(), live: slices.Clone(s.live), stale: slices.Clone(s.stale)}
}

// allocOutcome is what a command returned, and the allocator's state after.
type allocOutcome struct {
	blocks []allocator.Block
	fit    int
	err    error // for the model: the sentinel the error must wrap
	view   frozenView
}

// frozenView is a allocref.AllocView captured after a command.
type frozenView struct {
	stats   allocator.Stats
	extents []allocator.Block
	verify  error
}

func (f frozenView) Stats() allocator.Stats         { return f.stats }
func (f frozenView) FreeExtents() []allocator.Block { return f.extents }
func (f frozenView) Verify() error                  { return f.verify }

func freeze(a allocUnderTest) frozenView {
	return frozenView{a.Stats(), a.FreeExtents(), a.Verify()}
}

// allocCmd is one allocator call. Free refers to live blocks by index.
type allocCmd struct {
	g          *propPool
	kind       int // 0 Allocate, 1 AllocateBatch, 2 AllocateUpTo, 3 Fit, 4 Free
	size       int64
	n          int
	p          allocator.Placement
	idx, count int // Free: count live blocks from live[idx % len]
	corrupt    int // Free: 0 none, 1 repeat a block, 2 one block a unit too long, 3 a foreign block, 4 a stale handle
}

func (c allocCmd) String() string {
	switch c.kind {
	case 0:
		return fmt.Sprintf("Allocate(%d)", c.size)
	case 1:
		return fmt.Sprintf("AllocateBatch(%d, %d, %v)", c.size, c.n, c.p)
	case 2:
		return fmt.Sprintf("AllocateUpTo(%d, %d, %v)", c.size, c.n, c.p)
	case 3:
		return fmt.Sprintf("Fit(%d, %d)", c.size, c.n)
	}
	return fmt.Sprintf("Free(%d from #%d, corruption %d)", c.count, c.idx, c.corrupt)
}

// request resolves a Free's blocks against a live list and the handles
// freed so far.
func (c allocCmd) request(live, stale []allocator.Block) []allocator.Block {
	var req []allocator.Block
	if c.corrupt == 4 && len(stale) > 0 {
		// A stale handle, alone: its offset and size may be live again.
		return []allocator.Block{stale[c.idx%len(stale)]}
	}
	for j := range min(c.count, len(live)) {
		req = append(req, live[(c.idx+j)%len(live)])
	}
	switch {
	case len(req) == 0:
	case c.corrupt == 1:
		req = append(req, req[0])
	case c.corrupt == 2:
		req[len(req)-1].Size += c.g.align
	case c.corrupt == 3:
		units := c.g.capacity / c.g.align
		req = append(req, allocator.Block{Offset: int64(c.idx) % units * c.g.align, Size: c.g.align})
	}
	return req
}

func (c allocCmd) Run(sut commands.SystemUnderTest) commands.Result {
	s := sut.(*allocSUT)
	var o allocOutcome
	switch c.kind {
	case 0:
		var b allocator.Block
		b, o.err = s.a.Allocate(c.size)
		if o.err == nil {
			o.blocks = []allocator.Block{b}
		}
	case 1:
		o.blocks, o.err = s.a.AllocateBatch(c.size, c.n, c.p)
	case 2:
		o.blocks, o.err = s.a.AllocateUpTo(c.size, c.n, c.p)
	case 3:
		o.fit = s.a.Fit(c.size, c.n)
	case 4:
		req := c.request(s.live, s.stale)
		if o.err = s.a.Free(req...); o.err == nil {
			s.live = slices.DeleteFunc(s.live, func(b allocator.Block) bool { return slices.Contains(req, b) })
			s.stale = append(s.stale, req...)
		}
	}
	if c.kind != 4 {
		s.live = append(s.live, o.blocks...)
	}
	o.view = freeze(s.a)
	return o
}

func (c allocCmd) NextState(state commands.State) commands.State {
	s := state.(*allocState).clone()
	r := s.ref
	switch c.kind {
	case 0:
		if b, ok := r.PlanAllocate(c.size); ok {
			s.want.blocks = []allocator.Block{b}
		} else {
			s.want.err = allocator.ErrOutOfMemory
		}
	case 1:
		if bs, ok := r.PlanBatch(c.size, c.n, c.p); ok {
			s.want.blocks = bs
		} else {
			s.want.err = allocator.ErrOutOfMemory
		}
	case 2:
		s.want.blocks = r.PlanUpTo(c.size, c.n, c.p)
	case 3:
		s.want.fit = r.MaxSlots(c.size, c.n)
	case 4:
		req := c.request(s.live, s.stale)
		if !r.Valid(req) {
			s.want.err = allocator.ErrInvalidBlock
			break
		}
		r.Release(req)
		s.live = slices.DeleteFunc(s.live, func(b allocator.Block) bool { return slices.Contains(req, b) })
		s.stale = append(s.stale, req...)
	}
	if err := r.Take(s.want.blocks); err != nil {
		panic(err)
	}
	s.live = append(s.live, s.want.blocks...)
	return s
}

func (c allocCmd) PreCondition(commands.State) bool { return true }

func (c allocCmd) PostCondition(state commands.State, result commands.Result) *gopter.PropResult {
	s, got := state.(*allocState), result.(allocOutcome)
	fail := func(format string, args ...any) *gopter.PropResult {
		return gopter.NewPropResult(false, fmt.Sprintf("%v: "+format, append([]any{c}, args...)...))
	}
	switch {
	case s.want.err != nil && !errors.Is(got.err, s.want.err):
		return fail("error %v, want one wrapping %v", got.err, s.want.err)
	case s.want.err == nil && got.err != nil:
		return fail("unexpected error %v", got.err)
	case !slices.Equal(got.blocks, s.want.blocks):
		return fail("blocks %v, model %v", got.blocks, s.want.blocks)
	case got.fit != s.want.fit:
		return fail("Fit = %d, model %d", got.fit, s.want.fit)
	}
	if err := s.ref.CompareView(got.view); err != nil {
		return fail("%v", err)
	}
	return gopter.NewPropResult(true, "")
}

// genAllocCmd generates commands: sizes of 1 to 16 units, some not
// aligned; batches of up to 20; every placement; frees of up to 4 live
// blocks, one in five corrupted, and stale handles replayed.
func genAllocCmd(g *propPool) func(commands.State) gopter.Gen {
	return func(commands.State) gopter.Gen { return genAllocCmdIn(g) }
}

func genAllocCmdIn(g *propPool) gopter.Gen {
	size := gen.Weighted([]gen.WeightedGen{
		{Weight: 3, Gen: gen.Int64Range(1, 4).Map(func(u int64) int64 { return u * g.unit })},
		{Weight: 2, Gen: gen.Int64Range(1, 16*g.unit)},
	})
	if g.unit != g.align { // large: exact 8 MiB objects most of the time
		size = gen.Weighted([]gen.WeightedGen{
			{Weight: 4, Gen: gen.Const(int64(8 << 20))},
			{Weight: 2, Gen: gen.Int64Range(1, 16).Map(func(u int64) int64 { return u * g.unit })},
			{Weight: 1, Gen: gen.Int64Range(1, 16*g.unit)},
		})
	}
	placement := gen.OneConstOf(allocator.ContiguousFirst, allocator.Scattered, allocator.Contiguous)
	return gopter.CombineGens(
		gen.Weighted([]gen.WeightedGen{
			{Weight: 2, Gen: gen.Const(0)}, {Weight: 3, Gen: gen.Const(1)}, {Weight: 3, Gen: gen.Const(2)},
			{Weight: 1, Gen: gen.Const(3)}, {Weight: 5, Gen: gen.Const(4)},
		}),
		size, gen.IntRange(0, 20).Map(func(n int) int { return n * g.batch }), placement, gen.IntRange(0, 1000), gen.IntRange(1, 4),
		gen.Weighted([]gen.WeightedGen{{Weight: 12, Gen: gen.Const(0)}, {Weight: 1, Gen: gen.IntRange(1, 3)}, {Weight: 2, Gen: gen.Const(4)}}),
	).Map(func(v []any) commands.Command {
		return allocCmd{g: g, kind: v[0].(int), size: v[1].(int64), n: v[2].(int), p: v[3].(allocator.Placement),
			idx: v[4].(int), count: v[5].(int), corrupt: v[6].(int)}
	})
}

// allocCommands builds the commands test over allocators made by build.
func allocCommands(build func(*allocator.Allocator) allocUnderTest) *commands.ProtoCommands {
	return allocCommandsIn(smallPool, build)
}

// allocCommandsIn is allocCommands on pool g.
func allocCommandsIn(g *propPool, build func(*allocator.Allocator) allocUnderTest) *commands.ProtoCommands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(commands.State) commands.SystemUnderTest {
			return &allocSUT{a: build(g.newAllocator())}
		},
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) {
			if c, ok := sut.(*allocSUT).a.(interface{ Close() error }); ok {
				c.Close()
			}
		},
		InitialStateGen: gen.Const(0).Map(func(int) *allocState {
			return &allocState{ref: allocref.NewAlloc(g.capacity, g.align)}
		}),
		GenCommandFunc: genAllocCmd(g),
	}
}

func realAllocator(a *allocator.Allocator) allocUnderTest { return a }

func TestPropAllocatorInvariants(t *testing.T) {
	check(t, commands.Prop(allocCommands(realAllocator)), params(t, 200, 80))
}

// TestPropAllocatorInvariants8MiB is the same property at production
// scale: 8 MiB-class objects in batches of up to 6000 on a 44.5 GiB
// MAP_NORESERVE pool, so the pool fills and fragments within a case.
func TestPropAllocatorInvariants8MiB(t *testing.T) {
	r, err := hostmem.NewMmapRegion(largePool.capacity, hostmem.MmapOptions{NoReserve: true})
	if err != nil {
		t.Skipf("large pool unavailable: %v", err)
	}
	r.Close()
	check(t, commands.Prop(allocCommandsIn(largePool, realAllocator)), params(t, 40, 40))
}
