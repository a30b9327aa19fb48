package scenario

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// Fill says how a store or restore writes the bytes of the blocks it was
// granted, through allocator.Bytes.
type Fill uint8

const (
	// FillEnds, the default, writes the first and the last byte of each
	// object: every object's memory is reached (and its first and last
	// page faulted in), at a cost independent of the object size.
	FillEnds Fill = iota
	// FillFull writes every byte of each object, as a real restore copies
	// the chunk. It makes wall time grow with the bytes moved.
	FillFull
	// FillNone writes nothing.
	FillNone
)

var fillNames = [...]string{"ends", "full", "none"}

// String returns "ends", "full" or "none".
func (f Fill) String() string { return enumName(fillNames[:], int(f), "Fill") }

// ParseFill is the inverse of Fill.String.
func ParseFill(s string) (Fill, error) {
	if i, ok := index(fillNames[:], s); ok {
		return Fill(i), nil
	}
	return 0, fmt.Errorf("fill %q: want ends, full or none", s)
}

// Options configures Run.
type Options struct {
	// Fill says how restored and stored objects are written.
	Fill Fill
	// MaxTraffic, when positive, cuts every traffic operation to at most
	// this much simulated time: the test-sized variant of a long scenario.
	MaxTraffic time.Duration
	// Check compares the runner's model of every object with l1's
	// Snapshot, and runs allocator.Verify, after every operation (after
	// every traffic operation as a whole). It is slow, for tests. The same
	// check always runs once at the end of a run.
	Check bool
	// Progress, when set, is advanced by the simulated time each run
	// covers, as it covers it, so a caller can report progress.
	Progress *atomic.Int64
	// Finished, when set, is incremented by RunMatrix as each run ends.
	Finished *atomic.Int64
}

// Sample is one point of a run's time series, taken every PlotSpec.Every
// of simulated time.
type Sample struct {
	T           time.Duration // simulated time since the start
	Usage       float64       // used ÷ capacity
	FailedCalls int64         // cumulative, see Result.FailedCalls
	OOMKeys     int64         // cumulative
	Evictions   uint64        // cumulative
}

// Result is what one policy did with one scenario. Reservation calls are
// the ReserveWrite calls of store, restore, reserve-write and traffic
// stores; the counts below cover the calls that had keys to allocate.
type Result struct {
	Scenario string
	Policy   Policy

	// Requested counts keys that needed memory (missing keys of a
	// ReserveWrite); Granted those that got it; OOMKeys those answered
	// OutOfMemory. Requested = Granted + OOMKeys.
	Requested, Granted, OOMKeys int64
	// Ideal is the oracle: the sum over reservation calls of the most an
	// ideal policy could have granted from the state the call met,
	// min(n, ⌊(free + evictable) ÷ s⌋) for n keys of aligned size s,
	// where free is the allocator's free bytes before the call and
	// evictable the bytes of the objects l1 may evict (finished, not
	// temporary, holding no lock) not named in the call. It assumes the ideal policy may evict every evictable object
	// and place objects anywhere in the freed bytes (as if the pool were
	// compacted), so it is an upper bound: Granted ≤ Ideal.
	Ideal int64
	// Calls counts reservation calls with keys to allocate; FailedCalls
	// those with at least one OutOfMemory key (LMCache logs one "Failed to
	// allocate" per such call); FailedWithFree those of FailedCalls that
	// gave up while the allocator had at least the n × s free bytes the
	// call needed (free bytes after the call plus the bytes it granted,
	// so what on-demand eviction freed inside the call counts): failures
	// that placement or fragmentation caused, not exhaustion.
	Calls, FailedCalls, FailedWithFree int64
	// AllocCalls and Probes are l1's counters: calls into the allocator
	// (AllocateBatch and AllocateUpTo, probes included) and the binary
	// search's trial allocations.
	AllocCalls, Probes uint64
	// Evictions counts objects evicted, by the periodic sweep (through
	// EvictTo) or on demand.
	Evictions uint64
	// Sweeps counts periodic sweep ticks; SweepsFired those at which usage
	// had reached the watermark and the sweep evicted.
	Sweeps, SweepsFired int64
	// Reads counts keys asked for by read, reserve-read and traffic reads;
	// ReadHits those that were resident and readable.
	Reads, ReadHits int64
	// PeakFrag and MeanFrag are the largest and mean fragmentation,
	// 1 − largest free extent ÷ free bytes (0 when nothing is free),
	// sampled after every operation: each call group of an explicit
	// operation and each traffic event.
	PeakFrag, MeanFrag float64
	// Sim is the simulated time covered; Wall the real time the replay
	// took, from the first operation to the last (creating the region and
	// the final check excluded).
	Sim, Wall time.Duration
	// Steps has one entry per operation of the scenario, in order: what
	// each operation alone requested, granted and evicted.
	Steps []Step
	// Series is the time series, when the scenario has a plot directive.
	Series []Sample
}

// Step is what one operation did: the reservation counts of Result,
// restricted to the operation, and the objects evicted during it.
type Step struct {
	Line                        int
	Kind                        OpKind
	Requested, Granted, OOMKeys int64
	Ideal                       int64
	Calls, FailedCalls          int64
	FailedWithFree              int64
	Evictions                   uint64
}

// GrantRatio returns Granted ÷ Ideal, the keys granted over what the
// oracle could have granted, or 1 when Ideal is 0. It measures stores
// only: it says nothing about reads (see ReadHitRate).
func (r *Result) GrantRatio() float64 { return grantRatio(r.Granted, r.Ideal) }

// GrantRatio returns Granted ÷ Ideal, or 1 when Ideal is 0.
func (s *Step) GrantRatio() float64 { return grantRatio(s.Granted, s.Ideal) }

// ReadHitRate returns ReadHits ÷ Reads, or 0 when nothing was read.
func (r *Result) ReadHitRate() float64 {
	if r.Reads == 0 {
		return 0
	}
	return float64(r.ReadHits) / float64(r.Reads)
}

func grantRatio(granted, ideal int64) float64 {
	if ideal == 0 {
		return 1
	}
	return float64(granted) / float64(ideal)
}

// Duration returns the simulated time the scenario covers: its advances
// and traffic, each traffic cut to maxTraffic when that is positive.
func (sc *Scenario) Duration(maxTraffic time.Duration) time.Duration {
	var d time.Duration
	for _, op := range sc.Ops {
		switch op.Kind {
		case OpAdvance:
			d += op.Duration
		case OpTraffic:
			d += trafficLen(op.Duration, maxTraffic)
		}
	}
	return d
}

func trafficLen(d, maxTraffic time.Duration) time.Duration {
	if maxTraffic > 0 && d > maxTraffic {
		return maxTraffic
	}
	return d
}

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

// epoch is simulated time zero; only differences matter.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// object is the runner's model of one l1 object.
type object struct {
	size     int64 // block size
	finished bool
	wlocked  bool
	temp     bool
	rlocks   int
	// The leases the runner holds: it acts as every writer and reader.
	wlease, rlease l1.Lease
}

func (o *object) evictable() bool { return o.finished && !o.wlocked && o.rlocks == 0 }

// leases returns the runner's write (or read) leases of the keys, 0 for
// keys it does not know.
func (r *runner) leases(keys []uint64, write bool) []l1.Lease {
	out := make([]l1.Lease, len(keys))
	for i, k := range keys {
		if o := r.objs[k]; o != nil {
			out[i] = o.rlease
			if write {
				out[i] = o.wlease
			}
		}
	}
	return out
}

type evKind uint8

const (
	evSample evKind = iota // before the others at the same instant
	evSweep
	evFinishRead
	evArrival
)

type event struct {
	t      time.Duration
	kind   evKind
	seq    uint64
	stream int
	keys   []uint64
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	if h[i].kind != h[j].kind {
		return h[i].kind < h[j].kind
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type histEntry struct {
	req    uint32
	chunks uint32
}

type streamState struct {
	s          *Stream
	group      int
	rng        *rand.Rand
	next       int         // next request number
	hist       []histEntry // ring of the newest Window stores
	head       int         // next write position in hist
	start, end time.Duration
}

type runner struct {
	sc    *Scenario
	pol   Policy
	opt   Options
	alloc *allocator.Allocator
	m     *l1.Manager[uint64]
	now   time.Duration
	objs  map[uint64]*object
	evict int64 // bytes of evictable objects in the model
	res   *Result
	q     eventHeap
	seq   uint64
	frags float64
	nfrag int64
	strs  []*streamState
	keys  []uint64
	temps []bool
	err   error
}

// Run replays sc under policy p on a fresh allocator over a heap region of
// sc.Pool bytes and a fresh l1.Manager whose clock is the simulated clock.
// It is deterministic: the same scenario, policy and options give the same
// Result, Wall aside.
func Run(sc *Scenario, p Policy, opt Options) (*Result, error) {
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
		pol:   p,
		opt:   opt,
		alloc: alloc,
		objs:  map[uint64]*object{},
		res:   &Result{Scenario: sc.Name, Policy: p},
	}
	cfg := l1.Config{
		Prefix:        [...]l1.PrefixStrategy{l1.PrefixNone, l1.PrefixBinarySearch, l1.PrefixOnePass}[p.Prefix],
		Placement:     [...]allocator.Placement{allocator.Contiguous, allocator.Scattered, allocator.ContiguousFirst}[p.Placement],
		EvictOnDemand: p.Eviction == EvictOnDemand,
		WriteTTL:      sc.WriteTTL,
		ReadTTL:       sc.ReadTTL,
		Now:           func() time.Time { return epoch.Add(r.now) },
	}
	if r.m, err = l1.New[uint64](alloc, cfg); err != nil {
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
	if p.Eviction == EvictPeriodic {
		r.push(event{t: sc.Sweep.Every, kind: evSweep})
	}
	if sc.Plot != nil {
		r.push(event{t: 0, kind: evSample})
	}
	begin := time.Now()
	for i := range sc.Ops {
		op := &sc.Ops[i]
		before := *r.res
		evBefore := r.m.Stats().Evictions
		err := r.op(op)
		rs := r.res
		rs.Steps = append(rs.Steps, Step{
			Line:           op.Line,
			Kind:           op.Kind,
			Requested:      rs.Requested - before.Requested,
			Granted:        rs.Granted - before.Granted,
			OOMKeys:        rs.OOMKeys - before.OOMKeys,
			Ideal:          rs.Ideal - before.Ideal,
			Calls:          rs.Calls - before.Calls,
			FailedCalls:    rs.FailedCalls - before.FailedCalls,
			FailedWithFree: rs.FailedWithFree - before.FailedWithFree,
			Evictions:      r.m.Stats().Evictions - evBefore,
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
	st := r.m.Stats()
	r.res.AllocCalls, r.res.Probes, r.res.Evictions = st.AllocCalls, st.Probes, st.Evictions
	if r.nfrag > 0 {
		r.res.MeanFrag = r.frags / float64(r.nfrag)
	}
	r.res.Sim = r.now
	return r.res, nil
}

func (r *runner) push(e event) {
	r.seq++
	e.seq = r.seq
	heap.Push(&r.q, e)
}

// onEvent keeps the model in step with removals l1 makes on its own:
// evictions, expiries, temporary objects, deletes and clears.
func (r *runner) onEvent(ev l1.Event[uint64]) {
	if ev.Kind != l1.EventRemoved {
		return
	}
	for _, k := range ev.Keys {
		if o := r.objs[k]; o != nil {
			if o.evictable() {
				r.evict -= o.size
			}
			delete(r.objs, k)
		}
	}
}

// set applies f to o, keeping the evictable byte count.
func (r *runner) set(o *object, f func(o *object)) {
	if o.evictable() {
		r.evict -= o.size
	}
	f(o)
	if o.evictable() {
		r.evict += o.size
	}
}

// fragSample records the fragmentation after an operation.
func (r *runner) fragSample() {
	st := r.alloc.Stats()
	f := 0.0
	if st.Free > 0 {
		f = 1 - float64(st.LargestFree)/float64(st.Free)
	}
	r.frags += f
	r.nfrag++
	r.res.PeakFrag = max(r.res.PeakFrag, f)
}

func (r *runner) sample() {
	used, total := r.m.Usage()
	r.res.Series = append(r.res.Series, Sample{
		T:           r.now,
		Usage:       float64(used) / float64(total),
		FailedCalls: r.res.FailedCalls,
		OOMKeys:     r.res.OOMKeys,
		Evictions:   r.m.Stats().Evictions,
	})
}

// advanceTo processes every event up to t, then sets the clock to t.
func (r *runner) advanceTo(t time.Duration) {
	for len(r.q) > 0 && r.q[0].t <= t && r.err == nil {
		e := heap.Pop(&r.q).(event)
		r.tick(e.t)
		r.handle(e)
	}
	r.tick(t)
}

func (r *runner) tick(t time.Duration) {
	if t > r.now {
		if r.opt.Progress != nil {
			r.opt.Progress.Add(int64(t - r.now))
		}
		r.now = t
	}
}

func (r *runner) handle(e event) {
	switch e.kind {
	case evSample:
		r.sample()
		r.push(event{t: e.t + r.sc.Plot.Every, kind: evSample})
	case evSweep:
		r.sweep()
		r.fragSample()
		r.push(event{t: e.t + r.sc.Sweep.Every, kind: evSweep})
	case evFinishRead:
		r.finishRead(e.keys, 1)
		r.fragSample()
	case evArrival:
		st := r.strs[e.stream]
		r.arrival(st)
		r.fragSample()
		if t, ok := st.nextArrival(e.t); ok {
			r.push(event{t: t, kind: evArrival, stream: e.stream})
		}
	}
}

// sweep is the reference controller: at usage ≥ watermark it evicts ratio
// of the keys, least recently used first, skipping locked objects. l1 has
// no "evict n keys" call, so it asks EvictTo for the byte target that
// many keys make: used − k × (used ÷ keys), plus half an object of slack
// so that rounding never takes one key too many. With one object size
// that is exactly k keys; with several, it is ratio of the bytes.
func (r *runner) sweep() {
	r.res.Sweeps++
	used, total := r.m.Usage()
	if float64(used) < r.sc.Sweep.Watermark*float64(total) {
		return
	}
	n := r.m.Len()
	k := int(r.sc.Sweep.Ratio * float64(n))
	if k == 0 {
		return
	}
	r.res.SweepsFired++
	avg := float64(used) / float64(n)
	target := float64(used) - float64(k)*avg + avg/2
	if _, err := r.m.EvictTo(math.Min(1, math.Max(0, target/float64(total)))); err != nil {
		r.err = err
	}
}

func (r *runner) op(op *Op) error {
	sc := r.sc
	switch op.Kind {
	case OpAdvance:
		r.advanceTo(r.now + op.Duration)
	case OpTraffic:
		d := trafficLen(op.Duration, r.opt.MaxTraffic)
		end := r.now + d
		for _, i := range op.Streams {
			st := r.strs[i]
			st.start, st.end = r.now, end
			if t, ok := st.nextArrival(r.now); ok {
				r.push(event{t: t, kind: evArrival, stream: i})
			}
		}
		r.advanceTo(end)
	case OpStore, OpRestore, OpReserveWrite:
		g := sc.Groups[op.Group]
		mode := WriteNew
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

// reserve makes one ReserveWrite call, fills the granted blocks and
// returns the granted keys (in a new slice).
func (r *runner) reserve(keys []uint64, layout int, temp bool, mode WriteMode) []uint64 {
	size := r.sc.Layouts[layout].Size
	aligned := r.sc.AlignedSize(layout)
	var named int64 // evictable bytes of existing keys in the call
	for _, k := range keys {
		if o := r.objs[k]; o != nil && o.evictable() {
			named += o.size
		}
	}
	before := r.alloc.Stats()
	evictable := r.evict - named
	var temps []bool
	if temp {
		r.temps = r.temps[:0]
		for range keys {
			r.temps = append(r.temps, true)
		}
		temps = r.temps
	}
	existed := make([]bool, len(keys))
	for i, k := range keys {
		existed[i] = r.objs[k] != nil
	}
	res, err := r.m.ReserveWrite(keys, temps, size, [...]l1.Mode{l1.ModeAll, l1.ModeNew, l1.ModeUpdate}[mode])
	if err != nil {
		r.err = err
		return nil
	}
	var ok []uint64
	var granted, oom int64
	for i, x := range res {
		k := keys[i]
		switch x.Status {
		case l1.OK:
			ok = append(ok, k)
			if o := r.objs[k]; o != nil && existed[i] {
				r.set(o, func(o *object) { o.wlocked, o.wlease = true, x.Lease }) // a re-lock keeps the object's flag
			} else {
				r.objs[k] = &object{size: x.Block.Size, wlocked: true, temp: temp, wlease: x.Lease}
				granted++
			}
			r.fill(x.Block, k)
		case l1.OutOfMemory:
			oom++
		}
	}
	need := granted + oom
	if need == 0 {
		return ok
	}
	rs := r.res
	rs.Calls++
	rs.Requested += need
	rs.Granted += granted
	rs.OOMKeys += oom
	rs.Ideal += min(need, (before.Free+evictable)/aligned)
	if oom > 0 {
		rs.FailedCalls++
		if r.alloc.Stats().Free+granted*aligned >= need*aligned {
			rs.FailedWithFree++
		}
	}
	return ok
}

func (r *runner) fill(b allocator.Block, k uint64) {
	if r.opt.Fill == FillNone {
		return
	}
	mem := r.alloc.Bytes(b)
	if len(mem) == 0 {
		r.err = fmt.Errorf("allocator.Bytes(%+v) is empty", b)
		return
	}
	v := byte(k) | 1
	if r.opt.Fill == FillEnds {
		mem[0], mem[len(mem)-1] = v, v
		return
	}
	mem[0] = v
	for n := 1; n < len(mem); n *= 2 {
		copy(mem[n:], mem[:n])
	}
}

func (r *runner) finishWrite(keys []uint64) {
	if len(keys) == 0 {
		return
	}
	st, err := r.m.FinishWrite(keys, r.leases(keys, true))
	if err != nil {
		r.err = err
		return
	}
	for i, s := range st {
		if o := r.objs[keys[i]]; s == l1.OK && o != nil {
			r.set(o, func(o *object) { o.wlocked, o.finished = false, true })
		}
	}
}

func (r *runner) finishWriteReserveRead(keys []uint64, locks int) {
	if len(keys) == 0 {
		return
	}
	res, err := r.m.FinishWriteAndReserveRead(keys, r.leases(keys, true), locks)
	if err != nil {
		r.err = err
		return
	}
	for i, x := range res {
		if o := r.objs[keys[i]]; x.Status == l1.OK && o != nil {
			r.set(o, func(o *object) { o.wlocked, o.finished, o.rlocks, o.rlease = false, true, o.rlocks+locks, x.Lease })
		}
	}
}

// reserveRead read-locks the keys and returns those it locked, in a new
// slice.
func (r *runner) reserveRead(keys []uint64, locks int) []uint64 {
	res, err := r.m.ReserveRead(keys, locks)
	if err != nil {
		r.err = err
		return nil
	}
	var ok []uint64
	for i, x := range res {
		if o := r.objs[keys[i]]; x.Status == l1.OK && o != nil {
			r.set(o, func(o *object) { o.rlocks, o.rlease = o.rlocks+locks, x.Lease })
			ok = append(ok, keys[i])
		}
	}
	r.res.Reads += int64(len(keys))
	r.res.ReadHits += int64(len(ok))
	return ok
}

func (r *runner) finishRead(keys []uint64, locks int) {
	if len(keys) == 0 {
		return
	}
	st, err := r.m.FinishRead(keys, r.leases(keys, false), locks)
	if err != nil {
		r.err = err
		return
	}
	for i, s := range st {
		if o := r.objs[keys[i]]; s == l1.OK && o != nil {
			r.set(o, func(o *object) { o.rlocks = max(0, o.rlocks-locks) })
		}
	}
}

// arrival handles one traffic request of stream st.
func (r *runner) arrival(st *streamState) {
	s := st.s
	if len(st.hist) > 0 && s.Reads > 0 && st.rng.Float64() < s.Reads {
		h := st.pick()
		keys := r.groupKeys(st.group, int(h.req), 0, int(h.chunks))
		ok := r.reserveRead(keys, 1)
		if s.Hold == 0 {
			r.finishRead(ok, 1)
		} else if len(ok) > 0 {
			r.push(event{t: r.now + s.Hold, kind: evFinishRead, keys: ok})
		}
		return
	}
	n := s.MinChunks + st.rng.IntN(s.MaxChunks-s.MinChunks+1)
	req := st.next
	st.next++
	if req >= 1<<reqBits {
		r.err = fmt.Errorf("stream %s: more than 2^32 requests", s.Name)
		return
	}
	keys := r.groupKeys(st.group, req, 0, n)
	ok := r.reserve(keys, s.Layout, false, WriteNew)
	r.finishWrite(ok)
	e := histEntry{req: uint32(req), chunks: uint32(n)}
	if len(st.hist) < s.Window {
		st.hist = append(st.hist, e)
	} else {
		st.hist[st.head] = e
		st.head = (st.head + 1) % s.Window
	}
}

// pick draws an earlier request by recency rank.
func (st *streamState) pick() histEntry {
	n := len(st.hist)
	var rank int
	switch st.s.Reuse.Kind {
	case ReuseUniform:
		rank = st.rng.IntN(n)
	case ReuseZipf:
		if n > 1 {
			rank = int(rand.NewZipf(st.rng, st.s.Reuse.S, 1, uint64(n-1)).Uint64())
		}
	}
	// The newest entry is just before head once the ring is full, else last.
	newest := n - 1
	if n == st.s.Window {
		newest = (st.head - 1 + n) % n
	}
	return st.hist[(newest-rank+n)%n]
}

// nextArrival returns the next arrival after t, before the traffic ends:
// a Poisson process whose rate changes at burst edges.
func (st *streamState) nextArrival(t time.Duration) (time.Duration, bool) {
	for t < st.end {
		rate, until := st.rateAt(t)
		if rate > 0 {
			gap := time.Duration(st.rng.ExpFloat64() / rate * float64(time.Second))
			if gap >= 0 && t+gap < until {
				return t + gap, true
			}
		}
		t = until
	}
	return 0, false
}

// rateAt returns the arrival rate at t and when it next changes (at most
// the end of the traffic).
func (st *streamState) rateAt(t time.Duration) (float64, time.Duration) {
	s, b := st.s, st.s.Burst
	rel := t - st.start
	if b.Every == 0 {
		return s.Rate, st.end
	}
	if rel < b.At {
		return s.Rate, min(st.end, st.start+b.At)
	}
	ph := (rel - b.At) % b.Every
	if ph < b.Len {
		return s.Rate * b.X, min(st.end, t+b.Len-ph)
	}
	return s.Rate, min(st.end, t+b.Every-ph)
}

// check compares the model with l1 and verifies the allocator.
func (r *runner) check() error {
	if err := r.alloc.Verify(); err != nil {
		return fmt.Errorf("allocator: %w", err)
	}
	snap := r.m.Snapshot()
	if len(snap) != len(r.objs) {
		return fmt.Errorf("l1 holds %d objects, the model %d (a lock held past its TTL?)", len(snap), len(r.objs))
	}
	var used, evict int64
	for _, e := range snap {
		o := r.objs[e.Key]
		switch {
		case o == nil:
			return fmt.Errorf("l1 holds key %#x, the model does not", e.Key)
		case o.size != e.Block.Size || o.evictable() != e.Evictable || o.wlocked != e.WriteLocked || o.rlocks != e.ReadLocks:
			return fmt.Errorf("key %#x: l1 has %+v, the model %+v (a lock held past its TTL?)", e.Key, e.ObjectState, *o)
		}
		used += o.size
		if e.Evictable {
			evict += o.size
		}
	}
	if u, _ := r.m.Usage(); u != used {
		return fmt.Errorf("l1 uses %d bytes, its objects hold %d", u, used)
	}
	if evict != r.evict {
		return fmt.Errorf("evictable bytes: model counts %d, objects hold %d", r.evict, evict)
	}
	return nil
}

// bigPool is the pool size from which RunMatrix returns memory to the OS
// after each run.
const bigPool = 64 << 20

// RunMatrix runs every scenario under every policy on workers goroutines
// (at least 1) and returns the results scenario-major, in policy order.
func RunMatrix(scs []*Scenario, pols []Policy, opt Options, workers int) ([]*Result, error) {
	type job struct{ i, j int }
	out := make([]*Result, len(scs)*len(pols))
	errs := make([]error, len(out))
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				k := jb.i*len(pols) + jb.j
				out[k], errs[k] = Run(scs[jb.i], pols[jb.j], opt)
				if scs[jb.i].Pool >= bigPool {
					// Hand the region back to the OS now: otherwise the
					// next run's region is carved from freed heap and
					// zeroed, and resident memory grows by a few pools.
					debug.FreeOSMemory()
				}
				if opt.Finished != nil {
					opt.Finished.Add(1)
				}
			}
		}()
	}
	// Longest scenarios first, so the tail of the run stays parallel.
	order := make([]int, len(scs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(scs[b].Duration(opt.MaxTraffic), scs[a].Duration(opt.MaxTraffic))
	})
	for _, i := range order {
		for j := range pols {
			jobs <- job{i, j}
		}
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
