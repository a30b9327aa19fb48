package scenario

import (
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
)

// The shadow state: the runner's model of every object l1 holds, kept in
// step with every call's per-key statuses and with the removals l1's
// listener reports, so that the oracle can count the evictable bytes and
// check can compare the model with l1's Snapshot.

// object is the runner's model of one l1 object.
type object struct {
	size     int64 // block size
	finished bool
	wlocked  bool
	temp     bool
	rlocks   int
	// The leases the runner holds: it acts as every writer and reader.
	wlease, rlease l1.Lease
}

func (o *object) evictable() bool { return o.finished && !o.wlocked && o.rlocks == 0 }

// leases returns the runner's write (or read) leases of the keys, 0 for
// keys it does not know.
func (r *runner) leases(keys []uint64, write bool) []l1.Lease {
	out := make([]l1.Lease, len(keys))
	for i, k := range keys {
		if o := r.objs[k]; o != nil {
			out[i] = o.rlease
			if write {
				out[i] = o.wlease
			}
		}
	}
	return out
}

// onEvent keeps the model in step with removals l1 makes on its own:
// evictions, expiries, temporary objects, deletes and clears.
func (r *runner) onEvent(ev l1.Event[uint64]) {
	if ev.Kind != l1.EventRemoved {
		return
	}
	for _, k := range ev.Keys {
		if o := r.objs[k]; o != nil {
			if o.evictable() {
				r.evict -= o.size
			}
			delete(r.objs, k)
		}
	}
}

// set applies f to o, keeping the evictable byte count.
func (r *runner) set(o *object, f func(o *object)) {
	if o.evictable() {
		r.evict -= o.size
	}
	f(o)
	if o.evictable() {
		r.evict += o.size
	}
}

// check compares the model with l1 and verifies the allocator.
func (r *runner) check() error {
	if err := r.alloc.Verify(); err != nil {
		return fmt.Errorf("allocator: %w", err)
	}
	snap := r.m.Snapshot()
	if len(snap) != len(r.objs) {
		return fmt.Errorf("l1 holds %d objects, the model %d (a lock held past its TTL?)", len(snap), len(r.objs))
	}
	var used, evict int64
	for _, e := range snap {
		o := r.objs[e.Key]
		switch {
		case o == nil:
			return fmt.Errorf("l1 holds key %#x, the model does not", e.Key)
		case o.size != e.Block.Size || o.evictable() != e.Evictable || o.wlocked != e.WriteLocked || o.rlocks != e.ReadLocks:
			return fmt.Errorf("key %#x: l1 has %+v, the model %+v (a lock held past its TTL?)", e.Key, e.ObjectState, *o)
		}
		used += o.size
		if e.Evictable {
			evict += o.size
		}
	}
	if u, _ := r.m.Usage(); u != used {
		return fmt.Errorf("l1 uses %d bytes, its objects hold %d", u, used)
	}
	if evict != r.evict {
		return fmt.Errorf("evictable bytes: model counts %d, objects hold %d", r.evict, evict)
	}
	return nil
}
