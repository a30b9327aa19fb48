package metrics

import "github.com/kvalloc/kvalloc/l1"

// L1Stats is what the collector exposes for an l1 manager. It is defined
// here, not in l1, so that the counters l1 does not keep yet (lookups by
// call, more object states) can be filled in by whoever has them without a
// change to the collector.
type L1Stats struct {
	// Lookups are hits and misses by call ("ReserveRead", "UnsafeRead",
	// "Prefix", ...). Empty: l1.Stats has no lookup counters yet.
	Lookups []L1Lookups
	// Evictions are objects evicted, by reason ("on_demand", "evict_to").
	Evictions []L1Evictions
	// LockExpiries counts objects reclaimed because a lock lapsed.
	LockExpiries uint64
	// Objects are the objects held, by state.
	Objects []L1Objects
	// HeldBytes is the bytes in the objects' blocks.
	HeldBytes int64
	// The reservation counters of l1.Counters.
	WriteReservations, PartialGrants, FailedReservations, OOMKeys, FreeErrors uint64
}

// L1Lookups are one call's lookup results.
type L1Lookups struct {
	Call         string
	Hits, Misses uint64
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
)

// Eviction reasons FromL1Stats reports.
const (
	ReasonOnDemand = "on_demand"
	ReasonEvictTo  = "evict_to"
)

// FromL1Stats converts what l1.Stats holds today:
//
//   - evictions by reason: on_demand is OnDemandEvictions, evict_to the
//     rest of Evictions;
//   - objects by state: write_locked, temporary_read_locked, and other
//     (every other object: finished ones, read-locked or not);
//   - no lookups: l1 counts no hits or misses yet, so Lookups is empty and
//     kvalloc_l1_lookups_total is absent until it does.
func FromL1Stats(s l1.Stats) L1Stats {
	return L1Stats{
		Evictions: []L1Evictions{
			{ReasonOnDemand, s.OnDemandEvictions},
			{ReasonEvictTo, s.Evictions - min(s.OnDemandEvictions, s.Evictions)},
		},
		LockExpiries: s.Expired,
		Objects: []L1Objects{
			{StateWriteLocked, int64(s.WriteLocked)},
			{StateTemporaryReadLocked, int64(s.TemporaryReadLocked)},
			{StateOther, int64(s.Objects - s.WriteLocked - s.TemporaryReadLocked)},
		},
		HeldBytes:          s.Held,
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
