//go:build linux

package node

import (
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// driver is the trace.Driver of a node: the request model's steps as the
// engines' clients make them, over the socket. A DP request is served by
// its engine's client; a TP request by every rank's, in rank order.
type driver struct {
	tr     *trace.Trace
	cfg    *Config
	n      *node
	engine []uint8 // DP: each request's engine
	size   int64   // bytes asked per block
	unit   int64   // the aligned bytes a block takes
	key    func(b int32, rank int) l1.ObjectKey
	// keys caches Key for every block when the key is the block's alone.
	keys    []l1.ObjectKey
	flights map[int]*flight
	spare   []*flight
	kbuf    []l1.ObjectKey
	pos     []uint32
	// mark and gen dedupe blocks: those a TP request's ranks stored, and
	// those a sample finds in the pools.
	mark         []uint32
	gen          uint32
	used, unique sampler
	res          *Result
}

// flight is one request between its lookup and its finish: what each of
// its actors (the engine, or every rank) holds.
type flight struct{ acts []act }

// act is what one client did for a request.
type act struct {
	c       *client.Client
	rank    int
	hits    int
	reads   []client.Lease
	granted []int32
	writes  []client.Lease
}

func newDriver(tr *trace.Trace, cfg *Config, n *node, engine []uint8, o trace.Options) *driver {
	d := &driver{tr: tr, cfg: cfg, n: n, engine: engine, size: o.BlockSize, unit: o.Unit(), key: cfg.Variant.Key,
		flights: map[int]*flight{}, mark: make([]uint32, tr.Distinct),
		res: &Result{Daemons: len(n.daemons), Load: make([]int, Engines)}}
	if d.key == nil {
		d.keys = make([]l1.ObjectKey, tr.Distinct)
		for b := range d.keys {
			d.keys[b] = Key(int32(b), 0)
		}
	}
	return d
}

// keysOf returns the keys of blocks as rank stores them, in a buffer
// reused by the next call.
func (d *driver) keysOf(blocks []int32, rank int) []l1.ObjectKey {
	d.kbuf = d.kbuf[:0]
	for _, b := range blocks {
		if d.keys != nil {
			d.kbuf = append(d.kbuf, d.keys[b])
		} else {
			d.kbuf = append(d.kbuf, d.key(b, rank))
		}
	}
	return d.kbuf
}

// Lookup read-locks each actor's longest readable prefix and checks the
// stamp of every block it locked; the request's hits are the shortest
// prefix (a TP request skips prefill only where every rank hits).
func (d *driver) Lookup(i int, r *trace.Request) (int, error) {
	f := d.flight(i)
	hits := len(r.Blocks)
	for k := range f.acts {
		a := &f.acts[k]
		res, n, err := a.c.ReserveReadPrefix(d.keysOf(r.Blocks, a.rank), 1)
		if err != nil {
			return 0, err
		}
		for j, x := range res[:n] {
			if err := d.check(a.c, x.Block, r.Blocks[j]); err != nil {
				return 0, err
			}
			a.reads = append(a.reads, x.Lease)
		}
		a.hits = n
		if k > 0 && n != hits {
			d.res.RankSplits++
		}
		hits = min(hits, n)
	}
	d.flights[i] = f
	return hits, nil
}

// flight returns request i's actors, each with empty state.
func (d *driver) flight(i int) *flight {
	var f *flight
	if k := len(d.spare); k > 0 {
		f, d.spare = d.spare[k-1], d.spare[:k-1]
	} else {
		f = &flight{}
	}
	f.acts = f.acts[:0]
	add := func(e int) {
		f.acts = append(f.acts, act{c: d.n.clients[e], rank: e})
	}
	if d.cfg.Setup == TP {
		for e := range d.n.clients {
			add(e)
		}
	} else {
		e := int(d.engine[i])
		d.res.Load[e]++
		add(e)
	}
	return f
}

// check verifies that a block read as b ends with b's stamp.
func (d *driver) check(c *client.Client, blk client.Block, b int32) error {
	obj, err := c.Bytes(blk)
	if err != nil {
		return err
	}
	if got, ok := stamped(obj, b); !ok {
		return fmt.Errorf("node: block %d read at offset %d ends with the stamp of %d", b, blk.Offset, got)
	}
	d.res.Stamps++
	return nil
}

// Store reserves the request's blocks from hits on in ModeNew, actor by
// actor: a block that exists (resident, or being written by anyone,
// another rank included) is KEY_NOT_WRITABLE and left alone; a granted
// one is stamped and finished later. The chain positions are the
// policy's (trace.Positions).
func (d *driver) Store(i int, r *trace.Request, hits int) error {
	f := d.flights[i]
	tail := r.Blocks[hits:]
	if len(tail) > 0 {
		pos := trace.Positions(d.pos, d.cfg.Policy, d.tr.BlockTokens, r, hits)
		if pos != nil {
			d.pos = pos
		}
		if d.cfg.Variant.Positions != nil {
			pos = d.cfg.Variant.Positions(pos)
		}
		for k := range f.acts {
			if err := d.store(&f.acts[k], tail, pos); err != nil {
				return err
			}
		}
	}
	if i%d.cfg.SampleEvery == 0 {
		return d.sample()
	}
	return nil
}

func (d *driver) store(a *act, tail []int32, pos []uint32) error {
	res, err := a.c.ReserveWriteChain(d.keysOf(tail, a.rank), pos, nil, d.size, l1.ModeNew)
	if err != nil {
		return err
	}
	var ok, oom int64
	for j, x := range res {
		switch x.Status {
		case wire.StatusOK:
			obj, err := a.c.Bytes(x.Block)
			if err != nil {
				return err
			}
			stamp(obj, tail[j])
			a.granted = append(a.granted, tail[j])
			a.writes = append(a.writes, x.Lease)
			ok++
		case wire.StatusOutOfMemory:
			oom++
		}
	}
	var free int64
	if oom > 0 {
		st, err := a.c.Stats()
		if err != nil {
			return err
		}
		free = int64(st.CapacityBytes) - int64(st.UsedBytes)
	}
	d.res.Grants.Add(ok, oom, d.unit, free)
	return nil
}

// sample asks every daemon for its stats, over the socket, and for its
// manager's snapshot, in process, and adds the used bytes, summed, and the
// distinct blocks resident in any pool to the gauges.
func (d *driver) sample() error {
	var used uint64
	for _, c := range d.n.probes() {
		st, err := c.Stats()
		if err != nil {
			return err
		}
		used += st.UsedBytes
	}
	d.gen++
	unique := 0
	for _, dm := range d.n.daemons {
		for _, e := range dm.srv.Manager().Snapshot() {
			b, ok := blockOf(e.Key)
			if !ok || b >= len(d.mark) {
				return fmt.Errorf("node: daemon holds %v, not a block of the trace", e.Key)
			}
			if d.mark[b] != d.gen {
				d.mark[b] = d.gen
				unique++
			}
		}
	}
	d.used.add(float64(used))
	d.unique.add(float64(unique))
	return nil
}

// Finish commits each actor's writes and releases its read locks; the
// blocks that became resident are those some actor committed, once each.
func (d *driver) Finish(i int, r *trace.Request, hits int) ([]int32, error) {
	f := d.flights[i]
	delete(d.flights, i)
	d.gen++
	var stored []int32
	for k := range f.acts {
		a := &f.acts[k]
		if len(a.granted) > 0 {
			sts, err := a.c.FinishWrite(d.keysOf(a.granted, a.rank), a.writes)
			if err != nil {
				return nil, err
			}
			for j, s := range sts {
				if s != wire.StatusOK {
					d.res.Lost++
					continue
				}
				if b := a.granted[j]; d.mark[b] != d.gen {
					d.mark[b] = d.gen
					stored = append(stored, b)
				}
			}
		}
		if a.hits > 0 {
			sts, err := a.c.FinishRead(d.keysOf(r.Blocks[:a.hits], a.rank), a.reads, 1)
			if err != nil {
				return nil, err
			}
			for _, s := range sts {
				if s != wire.StatusOK {
					d.res.Lost++
				}
			}
		}
		a.reads, a.granted, a.writes = a.reads[:0], a.granted[:0], a.writes[:0]
	}
	d.spare = append(d.spare, f)
	return stored, nil
}

// Close samples the daemons a last time, checks that nothing is locked
// and that each daemon's locks, ledgers and allocator agree
// (server.Check), and sums their counters into res.
func (d *driver) Close(res *trace.Result) error {
	if err := d.sample(); err != nil {
		return err
	}
	d.res.Used, d.res.Unique = d.used.result(), d.unique.result()
	var errs []error
	res.Slots, res.PoolBytes = 0, 0
	probes := d.n.probes()
	for k, dm := range d.n.daemons {
		st, err := probes[k].Stats()
		if err != nil {
			return err
		}
		res.Slots += dm.slots
		res.PoolBytes += int64(st.PoolBytes)
		res.Evictions += st.Evictions
		res.OnDemandEvictions += st.OnDemandEvictions
		for _, e := range dm.srv.Manager().Snapshot() {
			if e.WriteLocked || e.ReadLocks > 0 {
				errs = append(errs, fmt.Errorf("node: daemon %d: %v still locked after the replay (write %v, %d read locks)", k, e.Key, e.WriteLocked, e.ReadLocks))
				break
			}
		}
		if err := dm.srv.Check(); err != nil {
			errs = append(errs, fmt.Errorf("node: daemon %d: %w", k, err))
		}
	}
	res.Grants, res.Lost = d.res.Grants, d.res.Lost
	return errors.Join(errs...)
}

// sampler gathers a Sampled figure.
type sampler struct {
	g   sim.Gauge
	end float64
}

func (s *sampler) add(v float64) { s.g.Add(v); s.end = v }

func (s *sampler) result() Sampled { return Sampled{Mean: s.g.Mean(), Peak: s.g.Peak, End: s.end} }
