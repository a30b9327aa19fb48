package trace

import (
	"fmt"
	"strings"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/l1"
)

// Policies is the table of l1 configurations the replay scores, one row
// each, on-demand rows first. Every row uses l1's one-pass prefix. A row's
// name is CONTROL/PLACEMENT, then /EVICTION when it is not LRU or the row
// passes the partial hint, then +partial for that hint:
// "on-demand/scattered", "periodic/scattered/s3fifo",
// "on-demand/scattered/lru+partial".
var Policies = []sim.Policy{
	policy(sim.OnDemand, allocator.Scattered, l1.EvictLRU, false),
	policy(sim.OnDemand, allocator.ContiguousFirst, l1.EvictLRU, false),
	policy(sim.OnDemand, allocator.Contiguous, l1.EvictLRU, false),
	policy(sim.OnDemand, allocator.Scattered, l1.EvictPrefix, false),
	policy(sim.OnDemand, allocator.Scattered, l1.EvictS3FIFO, false),
	policy(sim.OnDemand, allocator.Scattered, l1.EvictLRU, true),
	policy(sim.OnDemand, allocator.Scattered, l1.EvictPrefix, true),
	policy(sim.OnDemand, allocator.Scattered, l1.EvictS3FIFO, true),
	policy(sim.Periodic, allocator.Scattered, l1.EvictLRU, false),
	policy(sim.Periodic, allocator.ContiguousFirst, l1.EvictLRU, false),
	policy(sim.Periodic, allocator.Contiguous, l1.EvictLRU, false),
	policy(sim.Periodic, allocator.Scattered, l1.EvictPrefix, false),
	policy(sim.Periodic, allocator.Scattered, l1.EvictS3FIFO, false),
}

// policy returns the row of Policies with these settings, named.
func policy(c sim.Control, pl allocator.Placement, ev l1.EvictionPolicy, partial bool) sim.Policy {
	name := c.String() + "/" + pl.String()
	if ev != l1.EvictLRU || partial {
		name += "/" + ev.String()
	}
	if partial {
		name += "+partial"
	}
	return sim.Policy{Name: name, Prefix: sim.PrefixOnePass, Placement: pl, Control: c, Eviction: ev, Partial: partial}
}

// SelectPolicies returns the policies of Policies whose names match the
// comma-separated patterns; a pattern matches a name it equals or, ending
// in "*", a name it prefixes. "" and "all" select every policy.
func SelectPolicies(patterns string) ([]sim.Policy, error) {
	if patterns == "" || patterns == "all" {
		return Policies, nil
	}
	var out []sim.Policy
	for _, pat := range strings.Split(patterns, ",") {
		pat = strings.TrimSpace(pat)
		found := false
		for _, p := range Policies {
			if p.Name == pat || (strings.HasSuffix(pat, "*") && strings.HasPrefix(p.Name, strings.TrimSuffix(pat, "*"))) {
				if !containsPolicy(out, p.Name) {
					out = append(out, p)
				}
				found = true
			}
		}
		if !found {
			var names []string
			for _, p := range Policies {
				names = append(names, p.Name)
			}
			return nil, fmt.Errorf("trace: no policy matches %q; policies: %s", pat, strings.Join(names, ", "))
		}
	}
	return out, nil
}

func containsPolicy(ps []sim.Policy, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}
