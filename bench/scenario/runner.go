package scenario

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// Key layout: group (12 bits) | request (32 bits) | chunk (20 bits).
// Streams use the group numbers after the scenario's own groups.
const (
	maxGroups = 1 << 12
	chunkBits = 20
	reqBits   = 32
)

func makeKey(g, r, c int) uint64 {
	return uint64(g)<<(reqBits+chunkBits) | uint64(r)<<chunkBits | uint64(c)
}

// Kinds of the runner's events, in their order at one instant: plot
// samples, the periodic sweep, releases of held read locks, arrivals.
const (
	evSample uint8 = iota
	evSweep
	evFinishRead
	evArrival
)

// payload is what an event carries: the stream of an arrival, the keys of
// a release.
type payload struct {
	stream int
	keys   []uint64
}

// runner is one Run: the scenario's operations and events on one policy.
type runner struct {
	sc    *Scenario
	opt   Options
	alloc *allocator.Allocator
	m     *sim.Manager[uint64]
	clock sim.Clock
	q     sim.Queue[payload]
	objs  map[uint64]*object // the shadow state (shadow.go)
	evict int64              // bytes of evictable objects in the model
	res   *Result
	frag  sim.Gauge
	strs  []*streamState
	keys  []uint64
	temps []bool
	err   error
}

// Run replays sc under policy p on a fresh allocator over a heap region of
// sc.Pool bytes and a fresh l1.Manager whose clock is the simulated clock.
// It is deterministic: the same scenario, policy and options give the same
// Result, Wall aside.
func Run(sc *Scenario, p sim.Policy, opt Options) (*Result, error) {
	if len(sc.Groups)+len(sc.Streams) > maxGroups {
		return nil, fmt.Errorf("%s: more than %d groups and streams", sc.Name, maxGroups)
	}
	region, err := hostmem.NewHeapRegion(sc.Pool)
	if err != nil {
		return nil, err
	}
	alloc, err := allocator.New(region, allocator.Options{Align: sc.Align})
	if err != nil {
		region.Close()
		return nil, err
	}
	defer alloc.Close()
	r := &runner{
		sc:    sc,
		opt:   opt,
		alloc: alloc,
		objs:  map[uint64]*object{},
		res:   &Result{Scenario: sc.Name, Policy: p},
	}
	if r.m, err = sim.NewManager[uint64](p, alloc, l1.Config{WriteTTL: sc.WriteTTL, ReadTTL: sc.ReadTTL, Now: r.clock.Time}); err != nil {
		return nil, err
	}
	defer r.m.Close()
	r.m.AddListenerFunc(r.onEvent)
	for i := range sc.Streams {
		r.strs = append(r.strs, &streamState{
			s:     &sc.Streams[i],
			group: len(sc.Groups) + i,
			rng:   rand.New(rand.NewPCG(sc.Seed, uint64(i)+1)),
			hist:  make([]histEntry, 0, min(sc.Streams[i].Window, 1<<16)),
		})
	}
	if p.Control == sim.Periodic {
		r.q.Push(sc.Sweep.Every, evSweep, payload{})
	}
	if sc.Plot != nil {
		r.q.Push(0, evSample, payload{})
	}
	begin := time.Now()
	for i := range sc.Ops {
		op := &sc.Ops[i]
		before := r.res.Grants
		idealBefore := r.res.Ideal
		evBefore := r.m.Stats().Evictions
		err := r.op(op)
		rs := r.res
		rs.Steps = append(rs.Steps, Step{
			Line:      op.Line,
			Kind:      op.Kind,
			Grants:    rs.Grants.Sub(before),
			Ideal:     rs.Ideal - idealBefore,
			Evictions: r.m.Stats().Evictions - evBefore,
		})
		if err != nil {
			return nil, fmt.Errorf("%s line %d (%s), policy %s: %w", sc.Name, op.Line, op.Kind, p, err)
		}
		if r.err != nil {
			return nil, fmt.Errorf("%s line %d (%s), policy %s: %w", sc.Name, op.Line, op.Kind, p, r.err)
		}
		if opt.Check {
			if err := r.check(); err != nil {
				return nil, fmt.Errorf("%s line %d (%s), policy %s: check: %w", sc.Name, op.Line, op.Kind, p, err)
			}
		}
	}
	if sc.Plot != nil {
		r.sample()
	}
	r.res.Wall = time.Since(begin)
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%s, policy %s: final check: %w", sc.Name, p, err)
	}
	r.res.AllocCalls, r.res.Probes = r.m.AllocCalls()
	r.res.Evictions = r.m.Stats().Evictions
	r.res.PeakFrag, r.res.MeanFrag = r.frag.Peak, r.frag.Mean()
	r.res.Sim = r.clock.Now()
	return r.res, nil
}

// fragSample records the fragmentation after an operation.
func (r *runner) fragSample() { r.frag.Add(r.alloc.Stats().Fragmentation()) }

// sample appends a point of the time series.
func (r *runner) sample() {
	used, total := r.m.Usage()
	r.res.Series = append(r.res.Series, Sample{
		T:           r.clock.Now(),
		Usage:       float64(used) / float64(total),
		FailedCalls: r.res.FailedCalls,
		OOMKeys:     r.res.OOMKeys,
		Evictions:   r.m.Stats().Evictions,
	})
}

// advanceTo processes every event up to t, then sets the clock to t.
func (r *runner) advanceTo(t time.Duration) {
	for r.err == nil {
		e, ok := r.q.Next(t)
		if !ok {
			break
		}
		r.tick(e.T)
		r.handle(e)
	}
	r.tick(t)
}

// tick moves the clock forward to t, and Options.Progress with it.
func (r *runner) tick(t time.Duration) {
	if d := r.clock.AdvanceTo(t); d > 0 && r.opt.Progress != nil {
		r.opt.Progress.Add(int64(d))
	}
}

func (r *runner) handle(e sim.Event[payload]) {
	switch e.Kind {
	case evSample:
		r.sample()
		r.q.Push(e.T+r.sc.Plot.Every, evSample, payload{})
	case evSweep:
		r.res.Sweeps++
		t, err := r.sc.Sweep.Tick(r.m)
		if t.Evicted > 0 {
			r.res.SweepsFired++
		}
		if err != nil {
			r.err = err
		}
		r.fragSample()
		r.q.Push(e.T+r.sc.Sweep.Every, evSweep, payload{})
	case evFinishRead:
		r.finishRead(e.P.keys, 1)
		r.fragSample()
	case evArrival:
		st := r.strs[e.P.stream]
		r.arrival(st)
		r.fragSample()
		if t, ok := st.nextArrival(e.T); ok {
			r.q.Push(t, evArrival, payload{stream: e.P.stream})
		}
	}
}

func (r *runner) op(op *Op) error {
	sc := r.sc
	switch op.Kind {
	case OpAdvance:
		r.advanceTo(r.clock.Now() + op.Duration)
	case OpTraffic:
		now := r.clock.Now()
		end := now + trafficLen(op.Duration, r.opt.MaxTraffic)
		for _, i := range op.Streams {
			st := r.strs[i]
			st.start, st.end = now, end
			if t, ok := st.nextArrival(now); ok {
				r.q.Push(t, evArrival, payload{stream: i})
			}
		}
		r.advanceTo(end)
	case OpStore, OpRestore, OpReserveWrite:
		g := sc.Groups[op.Group]
		mode := l1.ModeNew
		if op.Kind == OpReserveWrite {
			mode = op.Mode
		}
		for req := range g.Requests {
			keys := r.groupKeys(op.Group, req, 0, g.Chunks)
			ok := r.reserve(keys, g.Layout, op.Temp, mode)
			switch op.Kind {
			case OpStore:
				r.finishWrite(ok)
			case OpRestore:
				r.finishWriteReserveRead(ok, op.Locks)
			}
			r.fragSample()
			if r.err != nil {
				break
			}
		}
	case OpClear:
		r.m.Clear(op.Force)
		r.fragSample()
	case OpEvictTo:
		if _, err := r.m.EvictTo(op.Ratio); err != nil {
			return err
		}
		r.fragSample()
	default:
		g := sc.Groups[op.Sel.Group]
		lo, hi := 0, g.Requests
		if op.Sel.Request >= 0 {
			lo, hi = op.Sel.Request, op.Sel.Request+1
		}
		for req := lo; req < hi && r.err == nil; req++ {
			keys := r.groupKeys(op.Sel.Group, req, op.Sel.From, op.Sel.To)
			r.selOp(op, keys)
			r.fragSample()
		}
	}
	return r.err
}

func (r *runner) selOp(op *Op, keys []uint64) {
	switch op.Kind {
	case OpRead:
		ok := r.reserveRead(keys, op.Locks)
		r.finishRead(ok, op.Locks)
	case OpReserveRead:
		r.reserveRead(keys, op.Locks)
	case OpFinishRead:
		r.finishRead(keys, op.Locks)
	case OpFinishWrite:
		r.finishWrite(keys)
	case OpFinishWriteReserveRead:
		r.finishWriteReserveRead(keys, op.Locks)
	case OpAbortWrite:
		st, err := r.m.AbortWrite(keys, r.leases(keys, true))
		if err != nil {
			r.err = err
			return
		}
		for i, s := range st {
			if o := r.objs[keys[i]]; s == l1.OK && o != nil {
				r.set(o, func(o *object) { o.wlocked = false })
			}
		}
	case OpDelete:
		if _, err := r.m.Delete(keys, op.Force); err != nil {
			r.err = err
		}
	case OpTouch:
		if err := r.m.Touch(keys); err != nil {
			r.err = err
		}
	}
}

// groupKeys returns chunks [from, to) of request req of group g, in a
// buffer reused by the next call.
func (r *runner) groupKeys(g, req, from, to int) []uint64 {
	r.keys = r.keys[:0]
	for c := from; c < to; c++ {
		r.keys = append(r.keys, makeKey(g, req, c))
	}
	return r.keys
}
