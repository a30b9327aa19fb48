package sim

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Control says who makes room for a reservation that does not fit.
type Control uint8

const (
	// Periodic, the zero value as in l1.Config, is LMCache's Controller:
	// reservations never evict; the controller's ticks do.
	Periodic Control = iota
	// OnDemand is l1's Config.EvictOnDemand: a reservation that does not
	// fit evicts inside the same call.
	OnDemand
)

// String returns "periodic" or "on-demand".
func (c Control) String() string {
	switch c {
	case Periodic:
		return "periodic"
	case OnDemand:
		return "on-demand"
	}
	return fmt.Sprintf("Control(%d)", uint8(c))
}

// Prefix is how ReserveWrite grants the largest prefix of a batch that
// does not fit: l1's strategy. The reports keep measuring the baselines,
// LMCache's binary search and its all-or-nothing behaviour before the
// fix, beside l1's one pass; should they leave l1.Config, Prefix and
// NewManager below are the one place that changes.
type Prefix = l1.PrefixStrategy

// The prefix strategies, by the names the reports print: "none",
// "binarysearch", "onepass".
const (
	PrefixNone         = l1.PrefixNone
	PrefixBinarySearch = l1.PrefixBinarySearch
	PrefixOnePass      = l1.PrefixOnePass
)

// Policy is one configuration of l1 over the allocator: one row of a
// report. Every knob a report varies is a field here and is applied in
// NewManager, so a new l1 knob is a field and a line there; a report that
// wants rows for it lists them (Name is the report's label).
type Policy struct {
	Name      string
	Prefix    Prefix
	Placement allocator.Placement
	Control   Control
	Eviction  l1.EvictionPolicy
	// Partial is a caller's hint, not an l1 setting: the trace replay
	// marks a request's last block, when its tokens do not fill it, with
	// l1.Partial (dead on arrival: the next turn's chain names another
	// key for it), so l1 evicts it first.
	Partial bool
}

// String returns the policy's Name.
func (p Policy) String() string { return p.Name }

// Config returns base (the lock lifetimes and the simulated clock) with
// p's placement, prefix strategy, control and eviction policy: the l1
// configuration of p, for a manager made elsewhere (a daemon's).
func (p Policy) Config(base l1.Config) l1.Config {
	cfg := base
	cfg.Placement = p.Placement
	cfg.Prefix = p.Prefix
	cfg.EvictOnDemand = p.Control == OnDemand
	cfg.Eviction = p.Eviction
	return cfg
}

// NewManager returns an l1 manager over mem configured by p: p.Config(base).
func NewManager[K comparable](p Policy, mem *allocator.Allocator, base l1.Config) (*l1.Manager[K], error) {
	return l1.New[K](mem, p.Config(base))
}
