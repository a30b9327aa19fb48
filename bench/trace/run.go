package trace

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
)

// Pool is a pool size: a fraction of the trace's distinct blocks, or a
// byte size (one of the two is set).
type Pool struct {
	Fraction float64
	Bytes    int64
}

// String returns the fraction ("0.25") or the byte size ("4GiB").
func (p Pool) String() string {
	if p.Bytes > 0 {
		return sim.FormatSize(p.Bytes)
	}
	return strconv.FormatFloat(p.Fraction, 'g', -1, 64)
}

// ParsePool parses a pool size: a fraction of the distinct blocks in
// (0, 1] ("0.25"), or a byte size with a unit B, KiB, MiB, GiB or TiB
// ("4GiB"). Errors wrap ErrOptions.
func ParsePool(s string) (Pool, error) {
	s = strings.TrimSpace(s)
	for _, u := range sim.SizeUnits {
		if strings.HasSuffix(s, u.Suffix) {
			n, err := strconv.ParseFloat(strings.TrimSuffix(s, u.Suffix), 64)
			b := n * float64(u.Mult)
			if err != nil || !(b >= 1) || b >= math.MaxInt64 || b != math.Trunc(b) {
				return Pool{}, fmt.Errorf("%w: pool %q: not a positive whole number of bytes", ErrOptions, s)
			}
			return Pool{Bytes: int64(b)}, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1) {
		return Pool{}, fmt.Errorf("%w: pool %q: want a fraction of the distinct blocks in (0, 1] or a size such as 4GiB", ErrOptions, s)
	}
	return Pool{Fraction: f}, nil
}

// ParsePools parses a comma-separated list of pool sizes.
func ParsePools(s string) ([]Pool, error) {
	var out []Pool
	for _, f := range strings.Split(s, ",") {
		p, err := ParsePool(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Unit returns the bytes one block takes in the pool: the block size
// rounded up to the alignment.
func (o Options) Unit() int64 {
	bs, align := o.BlockSize, o.Align
	if bs <= 0 {
		bs = DefaultBlockSize
	}
	if align <= 0 {
		align = allocator.DefaultAlign
	}
	return (bs + align - 1) / align * align
}

// Slots returns the blocks pool p holds for trace tr: the fraction of its
// distinct blocks, rounded down, or the bytes over the aligned block size.
func (p Pool) Slots(tr *Trace, o Options) int64 {
	if p.Bytes > 0 {
		return p.Bytes / o.Unit()
	}
	return int64(p.Fraction * float64(tr.Distinct))
}

// requests returns the requests a replay under o covers.
func (o Options) requests(tr *Trace) []Request {
	if o.MaxRequests > 0 && o.MaxRequests < len(tr.Requests) {
		return tr.Requests[:o.MaxRequests]
	}
	return tr.Requests
}

// Run replays tr through policy p, l1 over a fresh allocator of o.Slots
// blocks, on simulated time.
func Run(tr *Trace, p sim.Policy, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Trace: tr.Name, Policy: p.Name, Kind: KindL1, Slots: o.Slots}
	var clock sim.Clock
	c, err := newL1Cache(p, o, tr.BlockTokens, &clock, res)
	if err != nil {
		return nil, err
	}
	if err := replay(tr, c, o, p.Control == sim.Periodic, &clock, res); err != nil {
		return nil, fmt.Errorf("trace: %s under %s: %w", tr.Name, p.Name, err)
	}
	return res, nil
}

// Bound names for Result.Policy.
const (
	LRUName    = "ideal LRU"
	BeladyName = "Belady"
)

// RunLRU replays tr through the ideal LRU bound of o.Slots blocks.
func RunLRU(tr *Trace, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Trace: tr.Name, Policy: LRUName, Kind: KindLRU, Slots: o.Slots, PoolBytes: o.Slots * o.Unit()}
	var clock sim.Clock
	if err := replay(tr, newLRUCache(o.Slots), o, false, &clock, res); err != nil {
		return nil, err
	}
	return res, nil
}

// RunBelady replays tr through Belady's offline bound of o.Slots blocks.
func RunBelady(tr *Trace, o Options) (*Result, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &Result{Trace: tr.Name, Policy: BeladyName, Kind: KindBelady, Slots: o.Slots, PoolBytes: o.Slots * o.Unit()}
	var clock sim.Clock
	arrival := func(r *Request) time.Duration { return time.Duration(float64(r.Arrival) / o.Rate) }
	c := newBeladyCache(tr, o.requests(tr), o.Slots, arrival, &clock)
	if err := replay(tr, c, o, false, &clock, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Table is one pool size of a sweep: a result per policy, in the order
// asked, then the bounds.
type Table struct {
	Trace    *Trace
	Pool     Pool
	Slots    int64
	Policies []*Result
	LRU      *Result
	Belady   *Result
}

// Sweep replays tr at every pool size under every policy and both bounds,
// jobs replays at a time (each replay is single-threaded and independent).
// o.Slots is ignored; each pool sets it. Every row is replayed rounds
// times (at least once), the rounds interleaved in time (all rows once,
// then all again), so that a slow phase of the machine slows a row and
// the ideal LRU it is compared with alike. All rounds of a row must have
// the same outcome, or Sweep fails (the replay is deterministic); the row
// keeps the round whose cache calls took the least wall time.
func Sweep(tr *Trace, pools []Pool, policies []sim.Policy, o Options, jobs, rounds int) ([]*Table, error) {
	rounds = max(rounds, 1)
	tables := make([]*Table, len(pools))
	type row struct {
		run  func() (*Result, error)
		best **Result
	}
	var rows []row
	for i, p := range pools {
		t := &Table{Trace: tr, Pool: p, Slots: p.Slots(tr, o), Policies: make([]*Result, len(policies))}
		tables[i] = t
		po := o
		po.Slots = t.Slots
		// The bounds first: they are quick, and a slow l1 row then runs
		// beside other rows rather than alone at the end.
		rows = append(rows,
			row{func() (*Result, error) { return RunLRU(tr, po) }, &t.LRU},
			row{func() (*Result, error) { return RunBelady(tr, po) }, &t.Belady})
		for j, pol := range policies {
			rows = append(rows, row{func() (*Result, error) { return Run(tr, pol, po) }, &t.Policies[j]})
		}
	}
	var mu sync.Mutex
	err := sim.Parallel(jobs, rounds*len(rows), func(i int) error {
		rw := rows[i%len(rows)]
		r, err := rw.run()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		return keepFastest(rw.best, r)
	})
	if err != nil {
		return nil, err
	}
	return tables, nil
}

// keepFastest stores r in *best when *best is nil or slower, after
// checking that both had the same outcome.
func keepFastest(best **Result, r *Result) error {
	if *best == nil {
		*best = r
		return nil
	}
	if a, b := outcome(*best), outcome(r); a != b {
		return fmt.Errorf("trace: %s under %s is not deterministic:\n%+v\n%+v", r.Trace, r.Policy, a, b)
	}
	if r.Busy < (*best).Busy {
		*best = r
	}
	return nil
}

// outcome is r without its wall times.
func outcome(r *Result) Result { return r.Outcome() }

// Outcome returns r without its wall times (Busy, Phases, Wall): what a
// deterministic replay repeats exactly.
func (r *Result) Outcome() Result {
	o := *r
	o.Busy, o.Phases, o.Wall = 0, [NumPhases]time.Duration{}, 0
	return o
}
