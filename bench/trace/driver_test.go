package trace

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// managerDriver is a Driver over an l1 manager in process: the l1
// replay's steps through the Driver interface, so that RunDriver can be
// held to Run's numbers. Its skip, when set, drops the chain positions:
// the bug of a driver that calls ReserveWrite where the policy needs
// ReserveWriteChain (the partial hint rides on the positions).
type managerDriver struct {
	m     *l1.Manager[int32]
	a     *allocator.Allocator
	pol   sim.Policy
	tok   int64
	size  int64
	skip  bool
	reads map[int][]l1.Lease
	// writes are each request's granted blocks and their leases.
	writes map[int][2][]int32
	leases map[int][]l1.Lease
	pos    []uint32
}

func newManagerDriver(t *testing.T, tr *Trace, p sim.Policy, o Options, clock *sim.Clock) *managerDriver {
	r, err := hostmem.NewHeapRegion(o.Slots * o.Unit())
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{})
	require.NoError(t, err)
	m, err := sim.NewManager[int32](p, a, l1.Config{Now: clock.Time})
	require.NoError(t, err)
	return &managerDriver{m: m, a: a, pol: p, tok: tr.BlockTokens, size: o.Unit(),
		reads: map[int][]l1.Lease{}, writes: map[int][2][]int32{}, leases: map[int][]l1.Lease{}}
}

func (d *managerDriver) Lookup(i int, r *Request) (int, error) {
	leases, n, err := d.m.AppendReadPrefix(nil, r.Blocks, 1)
	d.reads[i] = leases
	return n, err
}

func (d *managerDriver) Store(i int, r *Request, hits int) error {
	tail := r.Blocks[hits:]
	if len(tail) == 0 {
		return nil
	}
	pos := Positions(d.pos, d.pol, d.tok, r, hits)
	if d.skip {
		pos = nil
	}
	rs, err := d.m.ReserveWriteChain(tail, pos, nil, d.size, l1.ModeNew)
	if err != nil {
		return err
	}
	var granted []int32
	for j, x := range rs {
		if x.Status == l1.OK {
			granted = append(granted, tail[j])
			d.leases[i] = append(d.leases[i], x.Lease)
		}
	}
	d.writes[i] = [2][]int32{granted}
	return nil
}

func (d *managerDriver) Finish(i int, r *Request, hits int) ([]int32, error) {
	granted := d.writes[i][0]
	var stored []int32
	if len(granted) > 0 {
		sts, err := d.m.FinishWrite(granted, d.leases[i])
		if err != nil {
			return nil, err
		}
		for j, s := range sts {
			if s == l1.OK {
				stored = append(stored, granted[j])
			}
		}
	}
	if hits > 0 {
		if _, err := d.m.FinishRead(r.Blocks[:hits], d.reads[i], 1); err != nil {
			return nil, err
		}
	}
	delete(d.reads, i)
	delete(d.writes, i)
	delete(d.leases, i)
	return stored, nil
}

func (d *managerDriver) Close(res *Result) error {
	st := d.m.Stats()
	res.Evictions, res.OnDemandEvictions, res.AllocCalls = st.Evictions, st.OnDemandEvictions, st.AllocCalls
	if err := d.m.Close(); err != nil {
		return err
	}
	return d.a.Close()
}

// TestRunDriverMatchesRun: the on-demand policies of the l1 table,
// replayed through a Driver over an in-process manager, hit exactly what
// Run hits on a prefix of the conversation trace, with a pool small
// enough to evict; the Driver's warm misses are Run's evict prefill plus
// orphans. A driver that drops the chain positions, and with them the
// partial hint of the +partial rows, misses the mark there, so the
// comparison bites. (The prefix-aware rows do not need positions when
// the keys come in chain order, as they do here.)
func TestRunDriverMatchesRun(t *testing.T) {
	tr, err := ReadFile(conversation, 0)
	require.NoError(t, err)
	o := Options{Slots: 2500, MaxRequests: 1500}
	od, err := o.withDefaults()
	require.NoError(t, err)
	driven := func(p sim.Policy, skip bool) *Result {
		var clock sim.Clock
		d := newManagerDriver(t, tr, p, od, &clock)
		d.skip = skip
		got, err := RunDriver(tr, p.Name, d, o, &clock)
		require.NoError(t, err)
		return got
	}
	same := func(want, got *Result) bool {
		return want.Hits == got.Hits && want.HitTokens == got.HitTokens && want.Stored == got.Stored &&
			want.Cold == got.Cold && want.EvictPrefill+want.Orphans == got.EvictPrefill && got.Orphans == 0 &&
			want.Evictions == got.Evictions
	}
	for _, p := range Policies {
		if p.Control != sim.OnDemand {
			continue
		}
		want, err := Run(tr, p, o)
		require.NoError(t, err)
		require.Positive(t, want.Evictions, "the pool must evict")
		got := driven(p, false)
		require.True(t, same(want, got), "%s: Run %+v\nRunDriver %+v", p.Name, countsOf(want), countsOf(got))
		if p.Partial {
			require.False(t, same(want, driven(p, true)), "%s: dropping the partial hint must change the outcome", p.Name)
		}
	}
}
