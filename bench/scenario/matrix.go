package scenario

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
)

// The matrix's axes, in report order, baselines first: l1's prefix
// strategies, the allocator's placements and who makes room.
var (
	prefixes   = []sim.Prefix{sim.PrefixNone, sim.PrefixBinarySearch, sim.PrefixOnePass}
	placements = []allocator.Placement{allocator.Contiguous, allocator.Scattered, allocator.ContiguousFirst}
	controls   = []sim.Control{sim.Periodic, sim.OnDemand}
)

// policy returns the cell of the matrix with these settings, named
// PREFIX/PLACEMENT/CONTROL, such as "onepass/contiguous-first/on-demand".
func policy(pr sim.Prefix, pl allocator.Placement, c sim.Control) sim.Policy {
	return sim.Policy{Name: pr.String() + "/" + pl.String() + "/" + c.String(), Prefix: pr, Placement: pl, Control: c}
}

// Policies returns the whole matrix, prefix {none, binarysearch, onepass}
// × placement {contiguous, scattered, contiguous-first} × eviction
// {periodic, on-demand}: 18 policies, prefix outermost and eviction
// innermost, in that order.
func Policies() []sim.Policy {
	var ps []sim.Policy
	for _, pr := range prefixes {
		for _, pl := range placements {
			for _, c := range controls {
				ps = append(ps, policy(pr, pl, c))
			}
		}
	}
	return ps
}

// axisNames returns the names of the matrix's values, per axis.
func axisNames() [3][]string {
	var n [3][]string
	for _, pr := range prefixes {
		n[0] = append(n[0], pr.String())
	}
	for _, pl := range placements {
		n[1] = append(n[1], pl.String())
	}
	for _, c := range controls {
		n[2] = append(n[2], c.String())
	}
	return n
}

// ParsePolicy returns the policy of the matrix named s, as
// PREFIX/PLACEMENT/EVICTION.
func ParsePolicy(s string) (sim.Policy, error) {
	for _, p := range Policies() {
		if p.Name == s {
			return p, nil
		}
	}
	n := axisNames()
	return sim.Policy{}, fmt.Errorf("policy %q: want PREFIX/PLACEMENT/EVICTION with PREFIX one of %s, PLACEMENT one of %s, EVICTION one of %s",
		s, strings.Join(n[0], ", "), strings.Join(n[1], ", "), strings.Join(n[2], ", "))
}

// MatchPolicies returns the policies of the matrix that pattern selects.
// A pattern is PREFIX/PLACEMENT/EVICTION where any part may be "*"; the
// empty pattern selects all.
func MatchPolicies(pattern string) ([]sim.Policy, error) {
	if pattern == "" {
		return Policies(), nil
	}
	parts := strings.Split(pattern, "/")
	if len(parts) != 3 {
		return nil, fmt.Errorf("policy pattern %q: want PREFIX/PLACEMENT/EVICTION, parts may be *", pattern)
	}
	var out []sim.Policy
	for _, p := range Policies() {
		got := strings.Split(p.Name, "/")
		ok := true
		for i := range parts {
			ok = ok && (parts[i] == "*" || parts[i] == got[i])
		}
		if ok {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("policy pattern %q matches no policy", pattern)
	}
	return out, nil
}

// bigPool is the pool size from which RunMatrix returns memory to the OS
// after each run.
const bigPool = 64 << 20

// RunMatrix runs every scenario under every policy on workers goroutines
// (at least 1) and returns the results scenario-major, in policy order.
// The longest scenarios start first, so that the tail of the run stays
// parallel. On failure it returns the error of the first failed run in
// that order, and starts no run after it.
func RunMatrix(scs []*Scenario, pols []sim.Policy, opt Options, workers int) ([]*Result, error) {
	order := make([]int, len(scs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(scs[b].Duration(opt.MaxTraffic), scs[a].Duration(opt.MaxTraffic))
	})
	out := make([]*Result, len(scs)*len(pols))
	err := sim.Parallel(workers, len(out), func(k int) error {
		i, j := order[k/len(pols)], k%len(pols)
		res, err := Run(scs[i], pols[j], opt)
		out[i*len(pols)+j] = res
		if scs[i].Pool >= bigPool {
			// Hand the region back to the OS now: otherwise the next
			// run's region is carved from freed heap and zeroed, and
			// resident memory grows by a few pools.
			debug.FreeOSMemory()
		}
		if opt.Finished != nil {
			opt.Finished.Add(1)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
