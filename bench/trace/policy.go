package trace

import (
	"fmt"
	"strings"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Eviction is how an l1 policy makes room.
type Eviction uint8

const (
	// OnDemand is l1's Config.EvictOnDemand: a ReserveWrite that does not
	// fit evicts inside the same call.
	OnDemand Eviction = iota
	// Periodic is LMCache's controller: every Sweep.Every of simulated
	// time, at usage ≥ Sweep.Watermark, EvictTo(usage × (1 − Sweep.Ratio)),
	// which evicts that share of the objects (all have one size).
	// Reservations never evict; a store that does not fit gets a prefix.
	Periodic
)

// String returns "on-demand" or "periodic".
func (e Eviction) String() string {
	switch e {
	case OnDemand:
		return "on-demand"
	case Periodic:
		return "periodic"
	}
	return fmt.Sprintf("Eviction(%d)", uint8(e))
}

// Policy is one configuration of l1 over the allocator: one row of the
// report. Every field of l1.Config that a policy varies is set here, so a
// new l1 knob (such as an eviction-policy choice) becomes new rows of
// Policies and nothing else.
type Policy struct {
	// Name is the row's label, e.g. "on-demand/scattered".
	Name      string
	Placement allocator.Placement
	Eviction  Eviction
	// Configure, if set, adjusts the l1.Config after Placement and
	// Eviction are applied: the hook for l1 fields the table does not
	// name yet (for example a future Config.Eviction policy).
	Configure func(*l1.Config)
	// Partial makes the store mark a request's last block, when its
	// tokens do not fill it, with l1.Partial: the caller's hint that the
	// block is dead on arrival (the next turn's chain names another key
	// for it), so l1 evicts it first (under S3-FIFO, first of its small
	// queue).
	Partial bool
}

// Policies is the table of l1 configurations the replay scores, on-demand
// rows first. To add an eviction policy of l1, add rows here whose
// Configure sets it.
var Policies = []Policy{
	{Name: "on-demand/scattered", Placement: allocator.Scattered, Eviction: OnDemand},
	{Name: "on-demand/contiguous-first", Placement: allocator.ContiguousFirst, Eviction: OnDemand},
	{Name: "on-demand/contiguous", Placement: allocator.Contiguous, Eviction: OnDemand},
	{Name: "on-demand/scattered/prefix", Placement: allocator.Scattered, Eviction: OnDemand, Configure: evictWith(l1.EvictPrefix)},
	{Name: "on-demand/scattered/s3fifo", Placement: allocator.Scattered, Eviction: OnDemand, Configure: evictWith(l1.EvictS3FIFO)},
	{Name: "on-demand/scattered/lru+partial", Placement: allocator.Scattered, Eviction: OnDemand, Partial: true},
	{Name: "on-demand/scattered/prefix+partial", Placement: allocator.Scattered, Eviction: OnDemand, Configure: evictWith(l1.EvictPrefix), Partial: true},
	{Name: "on-demand/scattered/s3fifo+partial", Placement: allocator.Scattered, Eviction: OnDemand, Configure: evictWith(l1.EvictS3FIFO), Partial: true},
	{Name: "periodic/scattered", Placement: allocator.Scattered, Eviction: Periodic},
	{Name: "periodic/contiguous-first", Placement: allocator.ContiguousFirst, Eviction: Periodic},
	{Name: "periodic/contiguous", Placement: allocator.Contiguous, Eviction: Periodic},
	{Name: "periodic/scattered/prefix", Placement: allocator.Scattered, Eviction: Periodic, Configure: evictWith(l1.EvictPrefix)},
	{Name: "periodic/scattered/s3fifo", Placement: allocator.Scattered, Eviction: Periodic, Configure: evictWith(l1.EvictS3FIFO)},
}

// evictWith returns a Configure that sets l1's eviction policy. The rows
// without one use l1's default, LRU.
func evictWith(p l1.EvictionPolicy) func(*l1.Config) {
	return func(c *l1.Config) { c.Eviction = p }
}

// config returns the l1.Config of p on the clock now.
func (p Policy) config(now func() int64) l1.Config {
	cfg := l1.Config{
		Placement:     p.Placement,
		EvictOnDemand: p.Eviction == OnDemand,
		Now:           simClock(now),
	}
	if p.Configure != nil {
		p.Configure(&cfg)
	}
	return cfg
}

// SelectPolicies returns the policies of Policies whose names match the
// comma-separated patterns; a pattern matches a name it equals or, ending
// in "*", a name it prefixes. "" and "all" select every policy.
func SelectPolicies(patterns string) ([]Policy, error) {
	if patterns == "" || patterns == "all" {
		return Policies, nil
	}
	var out []Policy
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

func containsPolicy(ps []Policy, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}
