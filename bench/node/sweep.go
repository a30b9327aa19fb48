//go:build linux

package node

import (
	"errors"
	"fmt"
	"sync"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// Plan is a sweep of the node benchmark: every pool fraction, under every
// policy, DP's four configurations (a shared or private pool, each routed
// round-robin and by conversation) and, under the first policy, TP's three
// (shared, private, replicated), beside the in-process single engine of
// the same pool (bench/trace's replay) that the shared pool must equal.
type Plan struct {
	// Fractions are the pool sizes P, as shares of the trace's distinct
	// blocks (bench/trace's definition: ⌊fraction × distinct⌋ blocks).
	Fractions []float64
	// Policies are the DP rows' l1 policies, on-demand ones of
	// bench/trace's table; TP runs under the first.
	Policies []sim.Policy
	// Options are the replays' (MaxRequests, PrefillRate, Rate).
	Options trace.Options
	// TP adds TP's configurations; NoDP drops DP's.
	TP, NoDP bool
	// Jobs is how many replays run at a time (at least 1); each is one
	// goroutine driving its clients in order, and its daemons.
	Jobs int
}

// Point is one pool size under one policy: the in-process single engine
// and the node's configurations.
type Point struct {
	Fraction float64
	Slots    int64
	Policy   sim.Policy
	// Single is bench/trace's in-process replay of one engine with the
	// whole pool P: what a shared pool must reach.
	Single *trace.Result
	// DP[pools][routing] for pools Shared and Private and the routings of
	// Routings (nil when not run).
	DP [2][2]*Result
	// TP[pools] for Shared, Private and Replicated (nil when not run).
	TP [3]*Result
}

// Report is a sweep's outcome.
type Report struct {
	Trace  *trace.Trace
	Plan   Plan
	Points []*Point
	// Sessions is the conversations the rule found in the replay's
	// requests, and MultiTurn those with more than one request.
	Sessions, MultiTurn int
}

// Sweep runs plan over tr and checks that every shared pool equals the
// in-process single engine of its size: same hits, hit tokens, stores,
// cold and warm misses and evictions.
func Sweep(tr *trace.Trace, plan Plan) (*Report, error) {
	if len(plan.Fractions) == 0 || len(plan.Policies) == 0 {
		return nil, errors.New("node: a sweep needs a pool fraction and a policy")
	}
	rep := &Report{Trace: tr, Plan: plan}
	reqs := tr.Requests
	if m := plan.Options.MaxRequests; m > 0 && m < len(reqs) {
		reqs = reqs[:m]
	}
	sess, n, err := Sessions(reqs, MinShared)
	if err != nil {
		return nil, err
	}
	rep.Sessions = n
	turns := make([]int, n)
	for _, s := range sess {
		turns[s]++
	}
	for _, k := range turns {
		if k > 1 {
			rep.MultiTurn++
		}
	}
	var jobs []func() error
	var mu sync.Mutex
	run := func(dst **Result, cfg Config) {
		jobs = append(jobs, func() error {
			r, err := Run(tr, cfg)
			if err != nil {
				return fmt.Errorf("%s at %v of %s: %w", cfg.Name(), cfg.Fraction, cfg.Policy.Name, err)
			}
			mu.Lock()
			*dst = r
			mu.Unlock()
			return nil
		})
	}
	for _, f := range plan.Fractions {
		if !(f > 0 && f <= 1) {
			return nil, fmt.Errorf("node: pool fraction %v outside (0, 1]", f)
		}
		slots := int64(f * float64(tr.Distinct))
		for pi, pol := range plan.Policies {
			pt := &Point{Fraction: f, Slots: slots, Policy: pol}
			rep.Points = append(rep.Points, pt)
			base := Config{Policy: pol, Slots: slots, Fraction: f, Options: plan.Options}
			jobs = append(jobs, func() error {
				o := plan.Options
				o.Slots = slots
				r, err := trace.Run(tr, pol, o)
				mu.Lock()
				pt.Single = r
				mu.Unlock()
				return err
			})
			if !plan.NoDP {
				for ps := range 2 {
					for ri, rt := range Routings {
						cfg := base
						cfg.Setup, cfg.Pools, cfg.Routing = DP, Pools(ps), rt
						run(&pt.DP[ps][ri], cfg)
					}
				}
			}
			if plan.TP && pi == 0 {
				for ps := range 3 {
					cfg := base
					cfg.Setup, cfg.Pools = TP, Pools(ps)
					run(&pt.TP[ps], cfg)
				}
			}
		}
	}
	if err := sim.Parallel(plan.Jobs, len(jobs), func(i int) error { return jobs[i]() }); err != nil {
		return nil, err
	}
	var errs []error
	for _, pt := range rep.Points {
		for _, r := range []*Result{pt.DP[Shared][0], pt.DP[Shared][1], pt.TP[Shared]} {
			if r != nil {
				errs = append(errs, SameAsSingle(r, pt.Single))
			}
		}
	}
	return rep, errors.Join(errs...)
}

// Figures are what a shared pool and the in-process single engine of the
// same size must agree on: the replay's outcome but for the miss classes
// a daemon cannot tell apart (its warm misses are the single engine's
// evict prefill plus orphans) and the wall times.
type Figures struct {
	Requests                      int
	Refs, Hits, Tokens, HitTokens int64
	Cold, Warm, Stored            int64
	Evictions, OnDemandEvictions  uint64
	Lost                          int64
}

// FiguresOf returns r's Figures.
func FiguresOf(r *trace.Result) Figures {
	return Figures{r.Requests, r.Refs, r.Hits, r.Tokens, r.HitTokens, r.Cold, r.EvictPrefill + r.Orphans, r.Stored,
		r.Evictions, r.OnDemandEvictions, r.Lost}
}

// SameAsSingle returns an error unless the shared pool's run r has the
// Figures of single, the in-process engine with the same pool.
func SameAsSingle(r *Result, single *trace.Result) error {
	if a, b := FiguresOf(&r.Result), FiguresOf(single); a != b {
		return fmt.Errorf("node: %s at %d blocks under %s differs from one engine in process:\n daemon     %+v\n in process %+v",
			r.Config.Name(), r.Config.Slots, r.Config.Policy.Name, a, b)
	}
	return nil
}
