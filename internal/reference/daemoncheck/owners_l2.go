//go:build linux

package daemoncheck

import (
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// This file models the locks the daemon holds of its own for its L2 tier
// (wire/PROTOCOL.md, "The L2 tier"), beside the connections' ledgers, in a
// daemon ledger no connection can present a lease of:
//
//   - a copy to L2: after a finish, for each key it finished, in request
//     order, unless the object is temporary, the daemon read-locks the
//     object (one lock, its own), reads its size, releases the lock, and
//     stores the value in L2 if the release was honoured. The lock lives
//     for the copy only: between two steps the daemon holds no read lock;
//   - a prefetch: a lookup with the prefetch flag reserves, as the
//     daemon's own writes (mode new), the L2 run past the L1 prefix, in
//     runs of one size, stopping at the first refusal and aborting any
//     grant past it; those keys are the daemon's until their load;
//   - a load: the prefetch's keys whose L2 value is (still) there, of the
//     size the lookup saw, are finished in one call, the others aborted in
//     one call; a key is readable only once its load finished it, and its
//     block then holds exactly the L2 value's bytes.
//
// A connection never holds a daemon lease: presented, it is NotOwner, and
// a disconnect releases nothing of the daemon's.

// prefetch is one lookup's keys being loaded.
type prefetch[K comparable] struct {
	keys   []K
	leases []l1.Lease
	blocks []allocator.Block
	sizes  []int64
}

// daemonL2 is the model's side of the daemon's L2 tier.
type daemonL2[K comparable] struct {
	store   map[K]int64      // the L2 values' sizes
	writes  map[l1.Lease]K   // the prefetches' write locks
	pending map[K]l1.Lease   // the keys being loaded
	loads   []prefetch[K]    // in the order of their lookups
	reads   map[l1.Lease]int // read locks held for copies: none between steps
}

// EnableL2 gives the model a daemon with an L2 tier.
func (o *Owners[K]) EnableL2() {
	o.l2 = &daemonL2[K]{store: map[K]int64{}, writes: map[l1.Lease]K{}, pending: map[K]l1.Lease{}, reads: map[l1.Lease]int{}}
}

// DaemonHolds returns the write and read locks the daemon holds of its
// own.
func (o *Owners[K]) DaemonHolds() (writes, reads int) {
	if o.l2 == nil {
		return 0, 0
	}
	for _, n := range o.l2.reads {
		reads += n
	}
	return len(o.l2.writes), reads
}

// Pending returns the number of prefetches not yet loaded.
func (o *Owners[K]) Pending() int {
	if o.l2 == nil {
		return 0
	}
	return len(o.l2.loads)
}

// InL2 reports the size of k's L2 value, if L2 holds one.
func (o *Owners[K]) InL2(k K) (int64, bool) {
	if o.l2 == nil {
		return 0, false
	}
	n, ok := o.l2.store[k]
	return n, ok
}

// DaemonWriteLease returns the daemon's write lease of k, if it is
// loading k.
func (o *Owners[K]) DaemonWriteLease(k K) (l1.Lease, bool) {
	if o.l2 == nil {
		return 0, false
	}
	l, ok := o.l2.pending[k]
	return l, ok
}

// copyToL2 copies the keys a finish finished, as the daemon's put worker
// does, one key a call.
func (o *Owners[K]) copyToL2(keys []K) {
	if o.l2 == nil {
		return
	}
	for _, k := range keys {
		if st, ok := o.M.State(k); !ok || st.Temporary {
			continue
		}
		res, err := o.M.ReserveReadUntracked([]K{k}, 1)
		if err != nil || res[0].Status != l1.OK {
			continue
		}
		lease := res[0].Lease
		o.l2.reads[lease]++
		st, ok := o.M.State(k)
		size := st.Size
		if !ok || st.ReadLease != lease || st.Size < 0 || st.Size > res[0].Block.Size {
			size = -1
		}
		sts, err := o.M.FinishReadUntracked([]K{k}, []l1.Lease{lease}, 1)
		if o.l2.reads[lease]--; o.l2.reads[lease] == 0 {
			delete(o.l2.reads, lease)
		}
		if err == nil && sts[0] == l1.OK && size >= 0 {
			o.l2.store[k] = size
		}
	}
}

// Lookup models a lookup: the L1 prefix (finished, not write-locked), the
// run of keys past it that L2 holds, and with prefetch the keys the daemon
// began loading.
func (o *Owners[K]) Lookup(keys []K, prefetch bool) (l1n, l2n, pf int) {
	for l1n < len(keys) {
		st, ok := o.M.State(keys[l1n])
		if !ok || !st.Finished || st.WriteLocked {
			break
		}
		l1n++
	}
	if o.l2 == nil || l1n == len(keys) {
		return l1n, 0, 0
	}
	rest := keys[l1n:]
	var sizes []int64
	for _, k := range rest {
		n, ok := o.l2.store[k]
		if !ok {
			break
		}
		sizes = append(sizes, n)
	}
	l2n = len(sizes)
	if !prefetch || l2n == 0 {
		return l1n, l2n, 0
	}
	return l1n, l2n, o.prefetch(rest[:l2n], sizes)
}

// prefetch models the daemon's reservation of a lookup's L2 run.
func (o *Owners[K]) prefetch(keys []K, sizes []int64) int {
	d := o.l2
	var p prefetch[K]
	n := 0
	for n < len(keys) {
		if _, ok := d.pending[keys[n]]; ok {
			n++
			continue
		}
		j := n + 1
		for j < len(keys) && sizes[j] == sizes[n] {
			if _, ok := d.pending[keys[j]]; ok {
				break
			}
			j++
		}
		run := keys[n:j]
		res, err := o.M.ReserveWrite(run, nil, max(sizes[n], 1), l1.ModeNew)
		if err != nil {
			break
		}
		got := 0
		for got < len(res) && res[got].Status == l1.OK {
			got++
		}
		var back []K
		var backL []l1.Lease
		for i := got; i < len(res); i++ {
			if res[i].Status == l1.OK {
				back, backL = append(back, run[i]), append(backL, res[i].Lease)
			}
		}
		if len(back) > 0 {
			_, _ = o.M.AbortWrite(back, backL)
		}
		for i := range got {
			d.writes[res[i].Lease] = run[i]
			d.pending[run[i]] = res[i].Lease
			p.keys, p.leases = append(p.keys, run[i]), append(p.leases, res[i].Lease)
			p.blocks, p.sizes = append(p.blocks, res[i].Block), append(p.sizes, sizes[n+i])
		}
		n += got
		if got < len(res) {
			break
		}
	}
	if len(p.keys) > 0 {
		d.loads = append(d.loads, p)
	}
	return n
}

// Load is the oldest prefetch's load: its keys, and which of them the
// daemon must finish (the others it aborts).
type Load[K comparable] struct {
	Keys   []K
	Blocks []allocator.Block
	Sizes  []int64
	// Loaded[i] says Keys[i]'s L2 value was there, of the size the lookup
	// saw, and fits its block: the daemon finishes it; Statuses[i] is what
	// l1 answered the finish or the abort.
	Loaded   []bool
	Statuses []l1.Status
}

// NextLoad returns the oldest prefetch's keys, without loading it.
func (o *Owners[K]) NextLoad() ([]K, error) {
	if o.l2 == nil || len(o.l2.loads) == 0 {
		return nil, fmt.Errorf("daemoncheck: no prefetch to load")
	}
	return slices.Clone(o.l2.loads[0].keys), nil
}

// LoadNext models the load of the oldest prefetch: the keys L2 still
// holds at their size are finished in one call, the others aborted in
// one; the daemon's write locks go, whatever l1 answered.
func (o *Owners[K]) LoadNext() (Load[K], error) {
	if o.l2 == nil || len(o.l2.loads) == 0 {
		return Load[K]{}, fmt.Errorf("daemoncheck: no prefetch to load")
	}
	d := o.l2
	p := d.loads[0]
	d.loads = d.loads[1:]
	ld := Load[K]{Keys: p.keys, Blocks: p.blocks, Sizes: p.sizes, Loaded: make([]bool, len(p.keys)), Statuses: make([]l1.Status, len(p.keys))}
	var okK, badK []K
	var okL, badL []l1.Lease
	var okI, badI []int
	for i, k := range p.keys {
		if n, ok := d.store[k]; ok && n == p.sizes[i] && n <= p.blocks[i].Size {
			ld.Loaded[i] = true
			okK, okL, okI = append(okK, k), append(okL, p.leases[i]), append(okI, i)
		} else {
			badK, badL, badI = append(badK, k), append(badL, p.leases[i]), append(badI, i)
		}
	}
	if len(okK) > 0 {
		sts, _ := o.M.FinishWrite(okK, okL)
		for j, i := range okI {
			ld.Statuses[i] = sts[j]
		}
	}
	if len(badK) > 0 {
		sts, _ := o.M.AbortWrite(badK, badL)
		for j, i := range badI {
			ld.Statuses[i] = sts[j]
		}
	}
	for i, k := range p.keys {
		delete(d.writes, p.leases[i])
		delete(d.pending, k)
	}
	return ld, nil
}

// EvictL2 removes keys' values from the model's L2, as the store's own
// eviction would.
func (o *Owners[K]) EvictL2(keys []K) {
	if o.l2 == nil {
		return
	}
	for _, k := range keys {
		delete(o.l2.store, k)
	}
}
