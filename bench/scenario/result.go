package scenario

import (
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// Sample is one point of a run's time series, taken every PlotSpec.Every
// of simulated time.
type Sample struct {
	T           time.Duration // simulated time since the start
	Usage       float64       // used ÷ capacity
	FailedCalls int64         // cumulative, see Result.FailedCalls
	OOMKeys     int64         // cumulative
	Evictions   uint64        // cumulative
}

// Result is what one policy did with one scenario. Reservation calls are
// the ReserveWrite calls of store, restore, reserve-write and traffic
// stores; Grants counts those that had keys to allocate.
type Result struct {
	Scenario string
	Policy   sim.Policy

	sim.Grants
	// Ideal is the oracle: the sum over reservation calls of the most an
	// ideal policy could have granted from the state the call met,
	// min(n, ⌊(free + evictable) ÷ s⌋) for n keys of aligned size s,
	// where free is the allocator's free bytes before the call and
	// evictable the bytes of the objects l1 may evict (finished, not
	// temporary, holding no lock) not named in the call. It assumes the ideal policy may evict every evictable object
	// and place objects anywhere in the freed bytes (as if the pool were
	// compacted), so it is an upper bound: Granted ≤ Ideal.
	Ideal int64
	// AllocCalls and Probes are l1's counters: calls into the allocator
	// (AllocateBatch and AllocateUpTo, probes included) and the binary
	// search's trial allocations.
	AllocCalls, Probes uint64
	// Evictions counts objects evicted, by the periodic sweep (through
	// EvictTo) or on demand.
	Evictions uint64
	// Sweeps counts periodic sweep ticks; SweepsFired those at which usage
	// had reached the watermark and the sweep evicted.
	Sweeps, SweepsFired int64
	// Reads counts keys asked for by read, reserve-read and traffic reads;
	// ReadHits those that were resident and readable.
	Reads, ReadHits int64
	// PeakFrag and MeanFrag are the largest and mean fragmentation,
	// 1 − largest free extent ÷ free bytes (0 when nothing is free),
	// sampled after every operation: each call group of an explicit
	// operation and each traffic event.
	PeakFrag, MeanFrag float64
	// Sim is the simulated time covered; Wall the real time the replay
	// took, from the first operation to the last (creating the region and
	// the final check excluded).
	Sim, Wall time.Duration
	// Steps has one entry per operation of the scenario, in order: what
	// each operation alone requested, granted and evicted.
	Steps []Step
	// Series is the time series, when the scenario has a plot directive.
	Series []Sample
}

// Step is what one operation did: the reservation counts of Result,
// restricted to the operation, and the objects evicted during it.
type Step struct {
	Line int
	Kind OpKind
	sim.Grants
	Ideal     int64
	Evictions uint64
}

// GrantRatio returns Granted ÷ Ideal, the keys granted over what the
// oracle could have granted, or 1 when Ideal is 0. It measures stores
// only: it says nothing about reads (see ReadHitRate).
func (r *Result) GrantRatio() float64 { return grantRatio(r.Granted, r.Ideal) }

// GrantRatio returns Granted ÷ Ideal, or 1 when Ideal is 0.
func (s *Step) GrantRatio() float64 { return grantRatio(s.Granted, s.Ideal) }

// ReadHitRate returns ReadHits ÷ Reads, or 0 when nothing was read.
func (r *Result) ReadHitRate() float64 {
	if r.Reads == 0 {
		return 0
	}
	return float64(r.ReadHits) / float64(r.Reads)
}

func grantRatio(granted, ideal int64) float64 {
	if ideal == 0 {
		return 1
	}
	return float64(granted) / float64(ideal)
}
