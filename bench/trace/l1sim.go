package trace

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// l1Cache replays a Policy: l1.Manager over an allocator.Allocator on a
// region that reserves no memory.
type l1Cache struct {
	m     *l1.Manager[int32]
	a     *allocator.Allocator
	size  int64 // bytes asked per block
	unit  int64 // aligned bytes per block
	o     Options
	res   *Result
	last  []l1.Result // the last store's answer, for observe
	fired int64
	frag  float64 // sums for the means
	use   float64
	nobs  int64
	// partial is the Policy's Partial; blockTokens the trace's tokens per
	// block; pos the positions buffer of the stores.
	partial     bool
	blockTokens int64
	pos         []uint32
}

// newL1Cache builds the allocator and the manager of p for o.
func newL1Cache(p Policy, o Options, clock *int64, res *Result) (*l1Cache, error) {
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
	m, err := newManager(a, p.config(func() int64 { return *clock }))
	if err != nil {
		a.Close()
		return nil, err
	}
	res.PoolBytes = pool
	return &l1Cache{m: m, a: a, size: o.BlockSize, unit: unit, o: o, res: res}, nil
}

func (c *l1Cache) lookup(f *flight) error {
	n, leases, err := readPrefix(c.m, f.req.Blocks, f.readLeases)
	f.hits, f.readLeases = n, leases
	c.res.L1Calls++
	return err
}

func (c *l1Cache) store(f *flight) error {
	c.last = c.last[:0]
	tail := f.req.Blocks[f.hits:]
	if len(tail) == 0 {
		return nil
	}
	r := f.req
	partial := c.partial && r.Input < int64(len(r.Blocks))*c.blockTokens
	rs, pos, err := reserveWrite(c.m, c.last[:0], tail, f.hits, c.size, partial, c.pos)
	c.pos = pos
	c.res.L1Calls++
	if err != nil {
		return err
	}
	for i, r := range rs {
		if r.Status == l1.OK {
			f.granted = append(f.granted, tail[i])
			f.writeLeases = append(f.writeLeases, leaseOf(r))
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
	if ok+oom > 0 {
		c.res.Calls++
		c.res.Requested += ok + oom
		c.res.Granted += ok
		c.res.OOMKeys += oom
		if oom > 0 {
			c.res.FailedCalls++
			// The bytes free before on-demand eviction gave up: free now
			// plus what the call was granted.
			if st.Free+ok*c.unit >= (ok+oom)*c.unit {
				c.res.FailedWithFree++
			}
		}
	}
	frag := 0.0
	if st.Free > 0 {
		frag = 1 - float64(st.LargestFree)/float64(st.Free)
	}
	use := float64(st.Used) / float64(st.Capacity)
	c.frag += frag
	c.use += use
	c.nobs++
	c.res.PeakFrag = max(c.res.PeakFrag, frag)
	c.res.PeakUsage = max(c.res.PeakUsage, use)
}

func (c *l1Cache) finish(f *flight) ([]int32, error) {
	var stored []int32
	if len(f.granted) > 0 {
		sts, err := finishWrite(c.m, f.granted, f.writeLeases)
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
		sts, err := finishRead(c.m, f.req.Blocks[:f.hits], f.readLeases)
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
	used, capacity := usage(c.m)
	c.res.L1Calls++
	if float64(used) < c.o.Watermark*float64(capacity) {
		return nil
	}
	n, err := evictTo(c.m, float64(used)/float64(capacity)*(1-c.o.SweepRatio))
	c.res.L1Calls++
	if n > 0 {
		c.fired++
	}
	return err
}

func (c *l1Cache) readable(b int32) bool { return readable(c.m, b) }

func (c *l1Cache) close(res *Result) error {
	st := stats(c.m)
	res.AllocCalls, res.Evictions, res.OnDemandEvictions = st.AllocCalls, st.Evictions, st.OnDemandEvictions
	res.SweepsFired = c.fired
	if c.nobs > 0 {
		res.MeanFrag, res.MeanUsage = c.frag/float64(c.nobs), c.use/float64(c.nobs)
	}
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
	if err := closeManager(c.m); err != nil {
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
