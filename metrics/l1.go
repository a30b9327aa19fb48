package metrics

import "github.com/kvalloc/kvalloc/l1"

// L1Stats is what the collector exposes for an l1 manager. It is defined
// here, not in l1, so that figures l1 does not keep (more object states,
// a daemon's per-connection figures) can be filled in by whoever has them
// without a change to the collector.
type L1Stats struct {
	// Lookups are the lookups of each kind of call, by l1.LookupKind's
	// names ("read", "read_prefix", "unsafe_read", "write").
	Lookups []L1Lookups
	// Evictions are objects evicted, by reason ("on_demand", "evict_to").
	Evictions []L1Evictions
	// LockExpiries counts objects reclaimed because a lock lapsed.
	LockExpiries uint64
	// Objects are the objects held, by state.
	Objects []L1Objects
	// HeldBytes is the bytes in the objects' blocks.
	HeldBytes int64
	// QuarantinedBytes is the bytes of the blocks l1 holds in no object:
	// lapsed writes' (l1.Config.QuarantineLapsedWrites) and those of keys
	// deleted with force under a live lock; Quarantines counts the writes
	// quarantined at a lapse.
	QuarantinedBytes int64
	Quarantines      uint64
	// The reservation counters of l1.Counters.
	WriteReservations, PartialGrants, FailedReservations, OOMKeys, FreeErrors uint64
}

// L1Lookups are one kind of call's lookups (see l1.LookupCounts): the
// calls, and the keys they named by outcome.
type L1Lookups struct {
	Kind                         string
	Calls, Hits, Misses, Skipped uint64
}

// L1Evictions counts evictions for one reason.
type L1Evictions struct {
	Reason string
	Count  uint64
}

// L1Objects counts the objects in one state.
type L1Objects struct {
	State string
	Count int64
}

// Object states FromL1Stats reports.
const (
	StateWriteLocked         = "write_locked"
	StateTemporaryReadLocked = "temporary_read_locked"
	StateOther               = "other"
	StateQuarantined         = "quarantined"
)

// Eviction reasons FromL1Stats reports.
const (
	ReasonOnDemand = "on_demand"
	ReasonEvictTo  = "evict_to"
)

// FromL1Stats converts what l1.Stats holds:
//
//   - lookups of every l1.LookupKind, by its name;
//   - evictions by reason: on_demand is OnDemandEvictions, evict_to the
//     rest of Evictions;
//   - objects by state: write_locked, temporary_read_locked, other
//     (every other object: finished ones, read-locked or not), and
//     quarantined (lapsed writes whose blocks are kept, which l1 does not
//     count among its objects);
//   - the quarantine's bytes and count.
func FromL1Stats(s l1.Stats) L1Stats {
	lookups := make([]L1Lookups, len(l1.LookupKinds))
	for i, k := range l1.LookupKinds {
		c := s.Lookups[k]
		lookups[i] = L1Lookups{Kind: k.String(), Calls: c.Calls, Hits: c.Hits, Misses: c.Misses, Skipped: c.Skipped}
	}
	return L1Stats{
		Lookups: lookups,
		Evictions: []L1Evictions{
			{ReasonOnDemand, s.OnDemandEvictions},
			{ReasonEvictTo, s.Evictions - min(s.OnDemandEvictions, s.Evictions)},
		},
		LockExpiries: s.Expired,
		Objects: []L1Objects{
			{StateWriteLocked, int64(s.WriteLocked)},
			{StateTemporaryReadLocked, int64(s.TemporaryReadLocked)},
			{StateOther, int64(s.Objects - s.WriteLocked - s.TemporaryReadLocked)},
			{StateQuarantined, int64(s.QuarantinedObjects)},
		},
		HeldBytes:          s.Held,
		QuarantinedBytes:   s.QuarantinedBytes,
		Quarantines:        s.Quarantines,
		WriteReservations:  s.WriteReservations,
		PartialGrants:      s.PartialGrants,
		FailedReservations: s.FailedReservations,
		OOMKeys:            s.OOMKeys,
		FreeErrors:         s.FreeErrors,
	}
}

// L1 returns an L1Source over a manager (any *l1.Manager[K]) through
// FromL1Stats.
func L1(m interface{ Stats() l1.Stats }) L1Source {
	return func() L1Stats { return FromL1Stats(m.Stats()) }
}
