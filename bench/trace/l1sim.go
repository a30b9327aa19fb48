package trace

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/l1"
)

// l1Cache replays a Policy: l1.Manager over an allocator.Allocator on a
// region that reserves no memory.
//
// Leases. AppendReadPrefix and ReserveWrite hand out a lease per key,
// which FinishRead and FinishWrite take back; the replay keeps them in
// the flight (flight.readLeases, flight.writeLeases), in the order of the
// keys it will finish.
//
// Chain order. The prefix-aware eviction policy (l1.EvictPrefix) ranks a
// chain's later blocks below its earlier ones, so the store passes each
// key's position in its request's chain to ReserveWriteChain.
type l1Cache struct {
	m    *l1.Manager[int32]
	a    *allocator.Allocator
	ctl  sim.Controller
	size int64 // bytes asked per block
	unit int64 // aligned bytes per block
	res  *Result
	last []l1.Result // the last store's answer, for observe
	// fired counts the controller's ticks that evicted.
	fired     int64
	frag, use sim.Gauge
	// pol is the policy (for the stores' chain positions); blockTokens
	// the trace's tokens per block; pos the positions buffer of the
	// stores.
	pol         sim.Policy
	blockTokens int64
	pos         []uint32
}

// newL1Cache builds the allocator and the manager of p for o, on clock.
func newL1Cache(p sim.Policy, o Options, blockTokens int64, clock *sim.Clock, res *Result) (*l1Cache, error) {
	align := o.Align
	if align == 0 {
		align = allocator.DefaultAlign
	}
	if align < 0 || align&(align-1) != 0 {
		return nil, fmt.Errorf("%w: alignment %d is not a power of two", ErrOptions, o.Align)
	}
	unit := (o.BlockSize + align - 1) / align * align
	if o.Slots > (1<<62)/unit {
		return nil, fmt.Errorf("%w: %d blocks of %d bytes overflow", ErrOptions, o.Slots, unit)
	}
	pool := o.Slots * unit
	r, err := newPoolRegion(pool)
	if err != nil {
		return nil, err
	}
	a, err := allocator.New(r, allocator.Options{Align: align})
	if err != nil {
		r.Close()
		return nil, err
	}
	m, err := sim.NewManager[int32](p, a, l1.Config{Now: clock.Time})
	if err != nil {
		a.Close()
		return nil, err
	}
	res.PoolBytes = pool
	return &l1Cache{
		m: m, a: a, size: o.BlockSize, unit: unit, res: res,
		ctl: sim.Controller{Every: o.SweepEvery, Watermark: o.Watermark, Ratio: o.SweepRatio, Measure: sim.Bytes},
		pol: p, blockTokens: blockTokens,
	}, nil
}

// lookup read-locks the longest readable prefix in one AppendReadPrefix,
// which stops at the first miss, so nothing behind it is locked or made
// more recently used.
func (c *l1Cache) lookup(f *flight) error {
	leases, n, err := c.m.AppendReadPrefix(f.readLeases, f.req.Blocks, 1)
	f.hits, f.readLeases = n, leases
	c.res.L1Calls++
	return err
}

// store reserves the blocks after the hits in one AppendReserveWriteChain
// in ModeNew, into a buffer it reuses: blocks that exist (resident behind
// a miss, or being written by another request) are left alone. It passes
// the chain positions the policy needs (Positions).
func (c *l1Cache) store(f *flight) error {
	c.last = c.last[:0]
	tail := f.req.Blocks[f.hits:]
	if len(tail) == 0 {
		return nil
	}
	pos := Positions(c.pos, c.pol, c.blockTokens, f.req, f.hits)
	if pos != nil {
		c.pos = pos
	}
	rs, err := c.m.AppendReserveWriteChain(c.last[:0], tail, pos, nil, c.size, l1.ModeNew)
	c.res.L1Calls++
	if err != nil {
		return err
	}
	for i, r := range rs {
		if r.Status == l1.OK {
			f.granted = append(f.granted, tail[i])
			f.writeLeases = append(f.writeLeases, r.Lease)
		}
	}
	c.last = rs
	return nil
}

func (c *l1Cache) observe(f *flight) {
	var ok, oom int64
	for _, r := range c.last {
		switch r.Status {
		case l1.OK:
			ok++
		case l1.OutOfMemory:
			oom++
		}
	}
	st := c.a.Stats()
	c.res.Add(ok, oom, c.unit, st.Free)
	c.frag.Add(st.Fragmentation())
	c.use.Add(float64(st.Used) / float64(st.Capacity))
}

func (c *l1Cache) finish(f *flight) ([]int32, error) {
	var stored []int32
	if len(f.granted) > 0 {
		sts, err := c.m.FinishWrite(f.granted, f.writeLeases)
		c.res.L1Calls++
		if err != nil {
			return nil, err
		}
		// Usually every write commits: stored is then f.granted itself
		// (the replay reads it before the flight is reused), and only a
		// lost write costs a new slice.
		stored = f.granted
		lost := 0
		for _, s := range sts {
			if s != l1.OK {
				lost++
			}
		}
		if lost > 0 {
			c.res.Lost += int64(lost)
			stored = make([]int32, 0, len(f.granted)-lost)
			for i, s := range sts {
				if s == l1.OK {
					stored = append(stored, f.granted[i])
				}
			}
		}
	}
	if f.hits > 0 {
		sts, err := c.m.FinishRead(f.req.Blocks[:f.hits], f.readLeases, 1)
		c.res.L1Calls++
		if err != nil {
			return nil, err
		}
		for _, s := range sts {
			if s != l1.OK {
				c.res.Lost++
			}
		}
	}
	return stored, nil
}

func (c *l1Cache) sweep() error {
	t, err := c.ctl.Tick(c.m)
	c.res.L1Calls += int64(t.Calls)
	if t.Evicted > 0 {
		c.fired++
	}
	return err
}

// readable reports whether block b is resident and not being written.
func (c *l1Cache) readable(b int32) bool {
	s, ok := c.m.State(b)
	return ok && !s.WriteLocked
}

func (c *l1Cache) close(res *Result) error {
	st := c.m.Stats()
	res.AllocCalls, res.Evictions, res.OnDemandEvictions = st.AllocCalls, st.Evictions, st.OnDemandEvictions
	res.SweepsFired = c.fired
	res.MeanFrag, res.PeakFrag = c.frag.Mean(), c.frag.Peak
	res.MeanUsage, res.PeakUsage = c.use.Mean(), c.use.Peak
	var errs []error
	if st.Held != st.Used {
		errs = append(errs, fmt.Errorf("trace: l1 holds %d bytes but the allocator has %d in use", st.Held, st.Used))
	}
	if st.FreeErrors > 0 {
		errs = append(errs, fmt.Errorf("trace: %d blocks the allocator refused to free", st.FreeErrors))
	}
	if err := c.a.Verify(); err != nil {
		errs = append(errs, err)
	}
	if err := c.m.Close(); err != nil {
		errs = append(errs, err)
	}
	if err := c.a.Close(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %v", res.Policy, errs)
	}
	return nil
}
