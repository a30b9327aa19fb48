package trace

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/l1"
)

// Defaults of Options.
const (
	// DefaultBlockSize is the bytes per block. A real 512-token block of a
	// large model is tens of MiB; the replay's outcome does not depend on
	// the size (every block has the same one, and the allocator never
	// touches region memory), so the default is small and the pool of the
	// whole conversation trace stays a few GiB of address space.
	DefaultBlockSize = 64 << 10
	// DefaultPrefillRate is the modelled prefill speed in tokens per
	// second: a request holds its read locks, and its blocks stay
	// write-locked, for (input tokens − hit tokens) ÷ rate.
	DefaultPrefillRate = 10000
)

// Options configures one replay.
type Options struct {
	// Slots is the pool size in blocks; it must be at least 1. The l1
	// pool is Slots × the aligned block size bytes.
	Slots int64
	// BlockSize is the bytes per block (0: DefaultBlockSize); Align the
	// allocator's alignment (0: allocator.DefaultAlign).
	BlockSize, Align int64
	// PrefillRate is tokens per second of prefill (0: DefaultPrefillRate).
	PrefillRate float64
	// Rate multiplies the arrival rate: timestamps are divided by it
	// (0: 1, the trace's own rate).
	Rate float64
	// SweepEvery, Watermark and SweepRatio configure the periodic
	// controller (0: sim's defaults, LMCache's 1 s, 0.8 and 0.2).
	SweepEvery            time.Duration
	Watermark, SweepRatio float64
	// MaxRequests, when positive, replays only the first that many
	// requests.
	MaxRequests int
}

// withDefaults validates o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.PrefillRate == 0 {
		o.PrefillRate = DefaultPrefillRate
	}
	if o.Rate == 0 {
		o.Rate = 1
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = sim.DefaultSweepEvery
	}
	if o.Watermark == 0 {
		o.Watermark = sim.DefaultWatermark
	}
	if o.SweepRatio == 0 {
		o.SweepRatio = sim.DefaultSweepRatio
	}
	switch {
	case o.Slots < 1:
		return o, fmt.Errorf("%w: pool of %d blocks: need at least 1", ErrOptions, o.Slots)
	case o.BlockSize < 0:
		return o, fmt.Errorf("%w: block size %d must be positive", ErrOptions, o.BlockSize)
	case !(o.PrefillRate > 0) || math.IsInf(o.PrefillRate, 0):
		return o, fmt.Errorf("%w: prefill rate %v tokens/s must be positive and finite", ErrOptions, o.PrefillRate)
	case !(o.Rate > 0) || math.IsInf(o.Rate, 0):
		return o, fmt.Errorf("%w: rate multiplier %v must be positive and finite", ErrOptions, o.Rate)
	case o.SweepEvery < 0:
		return o, fmt.Errorf("%w: sweep period %v must be positive", ErrOptions, o.SweepEvery)
	case !(o.Watermark > 0 && o.Watermark <= 1):
		return o, fmt.Errorf("%w: watermark %v outside (0, 1]", ErrOptions, o.Watermark)
	case !(o.SweepRatio > 0 && o.SweepRatio <= 1):
		return o, fmt.Errorf("%w: sweep ratio %v outside (0, 1]", ErrOptions, o.SweepRatio)
	}
	return o, nil
}

// ErrOptions wraps every rejection of Options or of a pool size.
var ErrOptions = errors.New("trace: invalid options")

// Kind says what produced a Result.
type Kind uint8

const (
	// KindL1 is a Policy: l1 over the allocator.
	KindL1 Kind = iota
	// KindLRU is the allocator-free ideal LRU bound.
	KindLRU
	// KindBelady is Belady's offline optimal bound.
	KindBelady
)

// Result is what one replay did. Counts are blocks unless named
// otherwise.
type Result struct {
	Trace  string
	Policy string // the Policy's name, "ideal LRU" or "Belady"
	Kind   Kind
	Slots  int64
	// PoolBytes is the l1 pool (Slots × the aligned block size).
	PoolBytes int64

	Requests int
	// Refs is the block references replayed; Hits those served from the
	// cache: per request, the longest prefix of its blocks that was
	// resident and readable at its arrival.
	Refs, Hits int64
	// Tokens is the input tokens replayed; HitTokens those the hits cover
	// (Trace.HitTokens).
	Tokens, HitTokens int64
	// The blocks that missed, by why: Cold had never been stored before;
	// EvictPrefill had been stored and were evicted since (the
	// eviction-induced prefill); Orphans were resident but lay behind the
	// request's first miss. Cold + EvictPrefill + Orphans = Refs − Hits.
	Cold, EvictPrefill, Orphans int64
	// Stored counts blocks that became resident.
	Stored int64

	// l1 only: what the stores' ReserveWrite calls granted.
	sim.Grants
	// Lost counts finishing calls (FinishWrite, FinishRead) that answered
	// anything but OK for a key: 0 unless a lock lapsed.
	Lost int64
	// AllocCalls, Evictions and OnDemandEvictions are l1's counters.
	AllocCalls, Evictions, OnDemandEvictions uint64
	// Sweeps and SweepsFired count periodic ticks and those that evicted.
	Sweeps, SweepsFired int64
	// MeanFrag and PeakFrag are 1 − largest free extent ÷ free bytes;
	// MeanUsage and PeakUsage used ÷ capacity; each sampled after every
	// request's store.
	MeanFrag, PeakFrag, MeanUsage, PeakUsage float64

	// L1Calls counts the calls into the cache (l1 calls; the bounds'
	// lookups, stores and finishes).
	L1Calls int64
	// Busy is the wall time spent in the cache's calls: l1 and the
	// allocator under it, or the bound's own structure. The replay's own
	// bookkeeping and the metrics are outside it. Phases splits it by
	// step of the request model.
	Busy   time.Duration
	Phases [NumPhases]time.Duration
	// Sim is the simulated time covered; Wall the real time of the replay.
	Sim, Wall time.Duration
}

// Phase is a step of the request model, for Result.Phases.
type Phase uint8

// The phases.
const (
	PhaseLookup Phase = iota // read-lock the hit prefix
	PhaseStore               // reserve the missing blocks
	PhaseFinish              // finish the writes, release the reads
	PhaseSweep               // the periodic controller
	NumPhases
)

var phaseNames = [NumPhases]string{"lookup", "store", "finish", "sweep"}

// String returns "lookup", "store", "finish" or "sweep".
func (p Phase) String() string {
	if p < NumPhases {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// HitRate returns Hits ÷ Refs.
func (r *Result) HitRate() float64 { return ratio(r.Hits, r.Refs) }

// TokenHitRate returns HitTokens ÷ Tokens.
func (r *Result) TokenHitRate() float64 { return ratio(r.HitTokens, r.Tokens) }

// NsPerBlockOp returns Busy ÷ Refs: the cache's wall time per block
// reference of the trace. Every replay of a trace has the same Refs, so
// the ratio of two results' NsPerBlockOp is the ratio of their Busy.
func (r *Result) NsPerBlockOp() float64 {
	if r.Refs == 0 {
		return 0
	}
	return float64(r.Busy.Nanoseconds()) / float64(r.Refs)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// flight is one request between its arrival and its finish.
type flight struct {
	req  *Request
	idx  int // the request's index in the replay
	hits int // leading blocks read-locked as hits
	// granted are the blocks this request reserved for writing.
	granted []int32
	// readLeases and writeLeases are the leases l1 handed out for the hits
	// and the granted blocks, in the order of the keys they will finish,
	// kept for FinishRead and FinishWrite (bounds leave them empty).
	readLeases, writeLeases []l1.Lease
}

// cache is one replayed policy: l1 over the allocator, or a bound. Each
// method is one step of the request model; the engine times lookup, store,
// finish and sweep, and not readable or observe.
type cache interface {
	// lookup sets f.hits to the longest readable prefix of f.req's
	// blocks, holding read locks on them.
	lookup(f *flight) error
	// store reserves f.req's blocks from f.hits on that are missing, into
	// f.granted.
	store(f *flight) error
	// finish completes f's writes and releases its reads, and returns the
	// blocks that became resident.
	finish(f *flight) ([]int32, error)
	// sweep is the periodic controller's tick (a no-op for bounds).
	sweep() error
	// readable reports whether block b is resident and readable now.
	readable(b int32) bool
	// observe records what the last store did (statistics only).
	observe(f *flight)
	// close ends the replay, filling in res, and checks what it can.
	close(res *Result) error
}

// Kinds of the replay's events: at one instant sweeps run first, then
// finishes; the arrivals of that instant come after both.
const (
	evSweep uint8 = iota
	evFinish
)

// replay runs tr through c under the request model on clock, timing c's
// calls; with periodic, the controller ticks every o.SweepEvery.
func replay(tr *Trace, c cache, o Options, periodic bool, clock *sim.Clock, res *Result) error {
	start := time.Now()
	reqs := o.requests(tr)
	everStored := make([]bool, tr.Distinct)
	var q sim.Queue[*flight]
	var free []*flight
	if periodic {
		q.Push(o.SweepEvery, evSweep, nil)
	}
	arrival := func(r *Request) time.Duration { return time.Duration(float64(r.Arrival) / o.Rate) }
	last := time.Duration(0)
	if len(reqs) > 0 {
		last = arrival(&reqs[len(reqs)-1])
	}
	timed := func(p Phase, f func() error) error {
		t0 := time.Now()
		err := f()
		d := time.Since(t0)
		res.Busy += d
		res.Phases[p] += d
		return err
	}
	// run handles one event.
	run := func(e sim.Event[*flight]) error {
		clock.AdvanceTo(e.T)
		switch e.Kind {
		case evSweep:
			res.Sweeps++
			if err := timed(PhaseSweep, c.sweep); err != nil {
				return err
			}
			// The ticks go on while requests remain to arrive or finish.
			if e.T < last || q.Len() > 0 {
				q.Push(e.T+o.SweepEvery, evSweep, nil)
			}
		case evFinish:
			f := e.P
			var stored []int32
			err := timed(PhaseFinish, func() (err error) { stored, err = c.finish(f); return })
			if err != nil {
				return err
			}
			for _, b := range stored {
				everStored[b] = true
			}
			res.Stored += int64(len(stored))
			f.req, f.granted, f.readLeases, f.writeLeases = nil, f.granted[:0], f.readLeases[:0], f.writeLeases[:0]
			free = append(free, f)
		}
		return nil
	}
	for i := range reqs {
		r := &reqs[i]
		t := arrival(r)
		for e, ok := q.Next(t); ok; e, ok = q.Next(t) {
			if err := run(e); err != nil {
				return err
			}
		}
		clock.AdvanceTo(t)
		var f *flight
		if n := len(free); n > 0 {
			f, free = free[n-1], free[:n-1]
		} else {
			f = new(flight)
		}
		f.req, f.idx, f.hits = r, i, 0
		if err := timed(PhaseLookup, func() error { return c.lookup(f) }); err != nil {
			return err
		}
		// Classify the misses before the store changes anything.
		for _, b := range r.Blocks[f.hits:] {
			switch {
			case !everStored[b]:
				res.Cold++
			case c.readable(b):
				res.Orphans++
			default:
				res.EvictPrefill++
			}
		}
		if err := timed(PhaseStore, func() error { return c.store(f) }); err != nil {
			return err
		}
		c.observe(f)
		res.Requests++
		res.Refs += int64(len(r.Blocks))
		res.Hits += int64(f.hits)
		res.Tokens += r.Input
		hitTok := tr.HitTokens(r, f.hits)
		res.HitTokens += hitTok
		prefill := time.Duration(float64(r.Input-hitTok) / o.PrefillRate * 1e9)
		q.Push(t+prefill, evFinish, f)
	}
	for q.Len() > 0 {
		if err := run(q.Pop()); err != nil {
			return err
		}
	}
	res.Sim = clock.Now()
	err := c.close(res)
	res.Wall = time.Since(start)
	return err
}
