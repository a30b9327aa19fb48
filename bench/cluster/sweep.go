//go:build linux

package cluster

import (
	"fmt"
	"sync"

	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

// The sweep's defaults: the N and Q, and a node's l1 of 5 % of the
// trace's distinct blocks (4 nodes hold 20 %, between bench/node's pools
// of 0.1 and 0.25).
var (
	DefaultNodes   = []int{2, 4}
	DefaultQ       = []float64{0.25, 1, 4}
	DefaultL1Share = 0.05
)

// Plan is a sweep of the cluster: every node count, routing and L2 size,
// under every write policy, beside isolated nodes (no L2) and the ideal
// bound (one LRU of N × L1 + Q blocks: bench/trace's RunLRU).
type Plan struct {
	// L1Share is a node's l1 as a share of the trace's distinct blocks
	// (⌊share × distinct⌋ blocks, at least 1).
	L1Share float64
	Nodes   []int
	// Q are the L2 sizes as multiples of one node's l1.
	Q        []float64
	Writes   []WritePolicy
	Routings []node.Routing
	// Options are the replays' (MaxRequests, PrefillRate, BlockSize).
	Options trace.Options
	// Jobs is how many replays run at a time (at least 1).
	Jobs int
	// Touch sets Config.Touch on every replay with L2, L2Evict its
	// Config.L2Evict.
	Touch   bool
	L2Evict L2Evict
	// Replay replays the nodes, isolated or with L2 (nil: Run, the
	// in-process model); the ideal bound is always bench/trace's.
	Replay func(*trace.Trace, Config) (*Result, error)
}

// DefaultPlan is the sweep: N ∈ {2, 4}, Q ∈ {0.25, 1, 4} × l1,
// both routings, every write policy.
func DefaultPlan() Plan {
	return Plan{L1Share: DefaultL1Share, Nodes: DefaultNodes, Q: DefaultQ, Writes: WritePolicies,
		Routings: node.Routings, Jobs: 2}
}

// Cell is one node count, routing and L2 size.
type Cell struct {
	Nodes   int
	Routing node.Routing
	Q       float64
	L2      int64 // Q in blocks
	// Isolated is the nodes without L2; Tiered[w] the nodes with L2 under
	// Plan.Writes[w]; Ideal the bound.
	Isolated *Result
	Tiered   []*Result
	Ideal    *trace.Result
}

// Best returns the index into Tiered of the highest block hit rate (the
// first on a tie).
func (c *Cell) Best() int {
	b := 0
	for i, r := range c.Tiered {
		if r.Hits > c.Tiered[b].Hits {
			b = i
		}
	}
	return b
}

// Report is one trace's sweep.
type Report struct {
	Trace   *trace.Trace
	Plan    Plan
	L1      int64 // a node's l1 in blocks
	Cells   []*Cell
	Elapsed float64 // seconds of wall time
}

// Sweep runs p over tr.
func Sweep(tr *trace.Trace, p Plan) (*Report, error) {
	if !(p.L1Share > 0 && p.L1Share <= 1) || len(p.Nodes) == 0 || len(p.Writes) == 0 || len(p.Routings) == 0 {
		return nil, fmt.Errorf("%w: plan %+v", ErrConfig, p)
	}
	l1 := max(int64(p.L1Share*float64(tr.Distinct)), 1)
	replay := p.Replay
	if replay == nil {
		replay = Run
	}
	rep := &Report{Trace: tr, Plan: p, L1: l1}
	type job struct {
		run func() error
	}
	var jobs []job
	var mu sync.Mutex
	isolated := map[[2]int]*Result{}
	ideal := map[[2]int64]*trace.Result{}
	for _, n := range p.Nodes {
		for ri, rt := range p.Routings {
			jobs = append(jobs, job{func() error {
				r, err := replay(tr, Config{Nodes: n, L1: l1, Routing: rt, Options: p.Options})
				mu.Lock()
				isolated[[2]int{n, ri}] = r
				mu.Unlock()
				return err
			}})
		}
		for _, q := range p.Q {
			l2 := int64(q * float64(l1))
			if l2 < 1 {
				return nil, fmt.Errorf("%w: Q %g × %d blocks is under one block", ErrConfig, q, l1)
			}
			jobs = append(jobs, job{func() error {
				o := p.Options
				o.Slots = int64(n)*l1 + l2
				r, err := trace.RunLRU(tr, o)
				mu.Lock()
				ideal[[2]int64{int64(n), l2}] = r
				mu.Unlock()
				return err
			}})
			for _, rt := range p.Routings {
				c := &Cell{Nodes: n, Routing: rt, Q: q, L2: l2, Tiered: make([]*Result, len(p.Writes))}
				rep.Cells = append(rep.Cells, c)
				for wi, w := range p.Writes {
					jobs = append(jobs, job{func() (err error) {
						c.Tiered[wi], err = replay(tr, Config{Nodes: n, L1: l1, L2: l2, Write: w, Touch: p.Touch, L2Evict: p.L2Evict, Routing: rt, Options: p.Options})
						return err
					}})
				}
			}
		}
	}
	if err := sim.Parallel(max(p.Jobs, 1), len(jobs), func(i int) error { return jobs[i].run() }); err != nil {
		return nil, err
	}
	for _, c := range rep.Cells {
		for ri, rt := range p.Routings {
			if rt.Name == c.Routing.Name {
				c.Isolated = isolated[[2]int{c.Nodes, ri}]
			}
		}
		c.Ideal = ideal[[2]int64{int64(c.Nodes), c.L2}]
	}
	return rep, nil
}
