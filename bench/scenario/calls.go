package scenario

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// The l1 calls of the operations and streams: each makes one call, takes
// the per-key statuses into the shadow state (shadow.go) and counts what
// Result reports.

// reserve makes one ReserveWrite call, fills the granted blocks and
// returns the granted keys (in a new slice).
func (r *runner) reserve(keys []uint64, layout int, temp bool, mode l1.Mode) []uint64 {
	size := r.sc.Layouts[layout].Size
	aligned := r.sc.AlignedSize(layout)
	var named int64 // evictable bytes of existing keys in the call
	for _, k := range keys {
		if o := r.objs[k]; o != nil && o.evictable() {
			named += o.size
		}
	}
	before := r.alloc.Stats()
	evictable := r.evict - named
	var temps []bool
	if temp {
		r.temps = r.temps[:0]
		for range keys {
			r.temps = append(r.temps, true)
		}
		temps = r.temps
	}
	existed := make([]bool, len(keys))
	for i, k := range keys {
		existed[i] = r.objs[k] != nil
	}
	res, err := r.m.ReserveWrite(keys, temps, size, mode)
	if err != nil {
		r.err = err
		return nil
	}
	var ok []uint64
	var granted, oom int64
	for i, x := range res {
		k := keys[i]
		switch x.Status {
		case l1.OK:
			ok = append(ok, k)
			if o := r.objs[k]; o != nil && existed[i] {
				r.set(o, func(o *object) { o.wlocked, o.wlease = true, x.Lease }) // a re-lock keeps the object's flag
			} else {
				r.objs[k] = &object{size: x.Block.Size, wlocked: true, temp: temp, wlease: x.Lease}
				granted++
			}
			r.fill(x.Block, k)
		case l1.OutOfMemory:
			oom++
		}
	}
	if r.res.Add(granted, oom, aligned, r.alloc.Stats().Free) {
		r.res.Ideal += min(granted+oom, (before.Free+evictable)/aligned)
	}
	return ok
}

func (r *runner) fill(b allocator.Block, k uint64) {
	if r.opt.Fill == FillNone {
		return
	}
	mem := r.alloc.Bytes(b)
	if len(mem) == 0 {
		r.err = fmt.Errorf("allocator.Bytes(%+v) is empty", b)
		return
	}
	v := byte(k) | 1
	if r.opt.Fill == FillEnds {
		mem[0], mem[len(mem)-1] = v, v
		return
	}
	mem[0] = v
	for n := 1; n < len(mem); n *= 2 {
		copy(mem[n:], mem[:n])
	}
}

func (r *runner) finishWrite(keys []uint64) {
	if len(keys) == 0 {
		return
	}
	st, err := r.m.FinishWrite(keys, r.leases(keys, true))
	if err != nil {
		r.err = err
		return
	}
	for i, s := range st {
		if o := r.objs[keys[i]]; s == l1.OK && o != nil {
			r.set(o, func(o *object) { o.wlocked, o.finished = false, true })
		}
	}
}

func (r *runner) finishWriteReserveRead(keys []uint64, locks int) {
	if len(keys) == 0 {
		return
	}
	res, err := r.m.FinishWriteAndReserveRead(keys, r.leases(keys, true), locks)
	if err != nil {
		r.err = err
		return
	}
	for i, x := range res {
		if o := r.objs[keys[i]]; x.Status == l1.OK && o != nil {
			r.set(o, func(o *object) { o.wlocked, o.finished, o.rlocks, o.rlease = false, true, o.rlocks+locks, x.Lease })
		}
	}
}

// reserveRead read-locks the keys and returns those it locked, in a new
// slice.
func (r *runner) reserveRead(keys []uint64, locks int) []uint64 {
	res, err := r.m.ReserveRead(keys, locks)
	if err != nil {
		r.err = err
		return nil
	}
	var ok []uint64
	for i, x := range res {
		if o := r.objs[keys[i]]; x.Status == l1.OK && o != nil {
			r.set(o, func(o *object) { o.rlocks, o.rlease = o.rlocks+locks, x.Lease })
			ok = append(ok, keys[i])
		}
	}
	r.res.Reads += int64(len(keys))
	r.res.ReadHits += int64(len(ok))
	return ok
}

func (r *runner) finishRead(keys []uint64, locks int) {
	if len(keys) == 0 {
		return
	}
	st, err := r.m.FinishRead(keys, r.leases(keys, false), locks)
	if err != nil {
		r.err = err
		return
	}
	for i, s := range st {
		if o := r.objs[keys[i]]; s == l1.OK && o != nil {
			r.set(o, func(o *object) { o.rlocks = max(0, o.rlocks-locks) })
		}
	}
}
