//go:build linux

package node

import (
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/l1"
)

// Setup is how the node's 8 GPUs serve: 8 engines, or one engine of 8
// ranks.
type Setup uint8

const (
	// DP is data parallelism: 8 engine processes, each request routed to
	// one of them, which looks it up and stores its missing blocks.
	DP Setup = iota
	// TP is tensor parallelism of an MLA model: every request is served
	// by 8 rank processes, each of which looks it up and stores the same
	// blocks; with one pool the first to reserve a block writes it, and
	// the others find it there.
	TP
)

// String returns "DP" or "TP".
func (s Setup) String() string {
	if s == TP {
		return "TP"
	}
	return "DP"
}

// Pools is how the node's host memory is split between the engines.
type Pools uint8

const (
	// Shared is one daemon with a pool of P blocks, every engine a client.
	Shared Pools = iota
	// Private is 8 daemons of P/8 blocks each (the remainder to the first
	// ones), one per engine: the same memory in all, split.
	Private
	// Replicated is 8 daemons of P blocks each, one per rank: 8 times the
	// memory, each pool holding what the shared pool holds when the ranks
	// store the same chunks. It is the baseline of TP's bytes.
	Replicated
)

var poolNames = [...]string{"shared", "private", "replicated"}

// String returns "shared", "private" or "replicated".
func (p Pools) String() string {
	if int(p) < len(poolNames) {
		return poolNames[p]
	}
	return fmt.Sprintf("Pools(%d)", uint8(p))
}

// Slots returns the blocks of each daemon's pool for a node pool of p
// blocks: one of p, 8 that sum to p, or 8 of p.
func (ps Pools) Slots(p int64) []int64 {
	switch ps {
	case Private:
		out := make([]int64, Engines)
		for i := range out {
			out[i] = p / Engines
			if int64(i) < p%Engines {
				out[i]++
			}
		}
		return out
	case Replicated:
		out := make([]int64, Engines)
		for i := range out {
			out[i] = p
		}
		return out
	}
	return []int64{p}
}

// DefaultSampleEvery is Config.SampleEvery's default: 24 samples over the
// conversation trace.
const DefaultSampleEvery = 512

// Config is one replay of the node.
type Config struct {
	Setup Setup
	Pools Pools
	// Routing spreads DP's requests; TP ignores it.
	Routing Routing
	// Policy is the daemons' l1 configuration; it must evict on demand
	// (a daemon runs no periodic controller).
	Policy sim.Policy
	// Slots is P, the node's pool in blocks (Pools says how it is split).
	Slots int64
	// Fraction is P as a share of the trace's distinct blocks, for the
	// report (0 when P was given in blocks).
	Fraction float64
	// Options are the replay's: MaxRequests, PrefillRate, Rate. Slots is
	// ignored; BlockSize 0 means BlockBytes.
	Options trace.Options
	// SampleEvery is how many requests apart the daemons' used bytes and
	// resident blocks are sampled (0: DefaultSampleEvery).
	SampleEvery int
	// Variant, when not the zero value, breaks the replay on purpose
	// (the package's tests), for the tests that must fail.
	Variant Variant
}

// Variant holds the hooks a deliberately broken variant of the replay
// replaces. The zero Variant is the benchmark.
type Variant struct {
	// Key, when set, replaces Key.
	Key func(b int32, rank int) l1.ObjectKey
	// Slots, when set, replaces Pools.Slots.
	Slots func(ps Pools, p int64) []int64
	// Positions, when set, filters the chain positions of every store.
	Positions func([]uint32) []uint32
}

// Name is the row's label: setup, pools and, for DP, routing.
func (c *Config) Name() string {
	if c.Setup == TP {
		return fmt.Sprintf("TP %s", c.Pools)
	}
	return fmt.Sprintf("DP %s %s", c.Pools, c.Routing.Name)
}

// Result is one replay of the node: the trace replay's figures (hits,
// tokens, misses, grants, evictions summed over the daemons) and the
// node's.
type Result struct {
	trace.Result
	Config Config
	// Daemons is the number of pools; Result.PoolBytes and Slots are
	// their sum.
	Daemons int
	// Used is the bytes the daemons' allocators had in use, summed over
	// the daemons (their stats, over the socket); Unique the distinct
	// blocks of the trace resident in any of the pools (their managers'
	// snapshots: a block held by several pools, or under several keys,
	// counts once). Both are sampled every SampleEvery requests and at the
	// end. Used ÷ Unique is the bytes the node spends per block of KV it
	// holds: BlockBytes when every block is held once.
	Used, Unique Sampled
	// RankSplits counts TP requests whose ranks found different prefixes
	// (the request's hits are the shortest); 0 when ranks share keys.
	RankSplits int64
	// Load is the requests each engine served (DP) or 0s (TP, where every
	// rank serves every request).
	Load []int
	// Stamps is the hits whose stamps the readers checked.
	Stamps int64
}

// Sampled is a figure sampled during a replay: its mean, its peak and
// its last sample.
type Sampled struct{ Mean, Peak, End float64 }

// PrefillTokens is the input tokens the engines computed: the tokens that
// missed.
func (r *Result) PrefillTokens() int64 { return r.Tokens - r.HitTokens }

// Run replays tr through the node of cfg: it starts the daemons (the real
// socket server, in this process), connects the 8 clients, drives them
// from this goroutine in the replay's order (so the outcome is
// deterministic), checks the daemons when the replay is over, and stops
// everything.
func Run(tr *trace.Trace, cfg Config) (*Result, error) {
	if cfg.Policy.Control != sim.OnDemand {
		return nil, fmt.Errorf("node: policy %s: a daemon evicts on demand only", cfg.Policy.Name)
	}
	if cfg.Slots < 1 {
		return nil, fmt.Errorf("node: pool of %d blocks: need at least 1", cfg.Slots)
	}
	o := cfg.Options
	if o.BlockSize == 0 {
		o.BlockSize = BlockBytes
	}
	o.Slots = cfg.Slots
	if cfg.SampleEvery <= 0 {
		cfg.SampleEvery = DefaultSampleEvery
	}
	slots := cfg.Pools.Slots(cfg.Slots)
	if cfg.Variant.Slots != nil {
		slots = cfg.Variant.Slots(cfg.Pools, cfg.Slots)
	}
	for _, s := range slots {
		if s < 1 {
			return nil, fmt.Errorf("node: %s pools of %v blocks: each needs at least 1", cfg.Pools, slots)
		}
	}
	reqs := tr.Requests
	if o.MaxRequests > 0 && o.MaxRequests < len(reqs) {
		reqs = reqs[:o.MaxRequests]
	}
	var engine []uint8
	if cfg.Setup == DP {
		if cfg.Routing.Assign == nil {
			return nil, errors.New("node: DP needs a routing")
		}
		var err error
		if engine, err = cfg.Routing.Assign(reqs, Engines); err != nil {
			return nil, err
		}
		if len(engine) != len(reqs) {
			return nil, fmt.Errorf("node: routing %s assigned %d of %d requests", cfg.Routing.Name, len(engine), len(reqs))
		}
	}
	var clock sim.Clock
	unit := o.Unit()
	n, err := startNode(slots, unit, cfg.Policy.Config(l1.Config{Now: clock.Time}), Engines)
	if err != nil {
		return nil, err
	}
	d := newDriver(tr, &cfg, n, engine, o)
	tres, err := trace.RunDriver(tr, cfg.Name(), d, o, &clock)
	err = errors.Join(err, n.close())
	if err != nil {
		return nil, err
	}
	res := d.res
	res.Result = *tres
	res.Config = cfg
	return res, nil
}
