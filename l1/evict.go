package l1

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
)

// Eviction.
//
// An object is evictable when its write has finished and it holds no live
// lock, read or write: LMCache's predicate. Temporary objects are no
// exception: a temporary object that is read-locked waits for its reader,
// but one finished with FinishWrite and never read holds no lock, so no TTL
// would ever reclaim it, and only eviction returns its memory (as in
// LMCache). One whose read lock lapses is reclaimed (see lock.go).
//
// The evictable objects, and only they, are in the eviction policy's
// structures (policy.go), which say which goes first. Two paths evict,
// both synchronous and under the manager lock:
//   - on demand, inside ReserveWrite when Config.EvictOnDemand is set and
//     a batch does not fit (LMCache PR #5290's proposal): in the policy's
//     order, skipping the call's own keys, until the batch fits;
//   - EvictTo, which a background controller calls on its own schedule.
//
// Neither visits an object that is not evictable, so a call costs
// O(victims), plus the call's own keys when the policy reaches them.
//
// Stopping as soon as the batch fits. Over a memory with Fit and
// FreeAround (the allocator), on-demand eviction asks Fit once how many
// objects fit, then counts what each victim adds without freeing anything:
// the victim's block, merged with the free extents on either side (from
// FreeAround, or from earlier victims of the same call, kept as runs:
// a short slice, indexed by a table once it is long), holds ⌊merged/size⌋ objects where the parts held ⌊left/size⌋ +
// ⌊right/size⌋. For Contiguous placement the count is the longest run
// instead. It stops at the first victim that makes the batch fit, frees the
// victims in one Free call and allocates: O(1) per victim and one walk of
// the free extents per call, so scattered victims cost what adjacent ones
// do. Over other memories it checks Fit after each victim, or, without
// Fit, retries the allocation whenever the free bytes would allow it.
//
// Reusing victims' blocks. Over the allocator itself (not a wrapper) with
// Scattered placement, a victim whose block is exactly one object of the
// batch's size, and adds exactly one object to the count (its merge with
// the free space around it makes room for no more), is not freed: its
// block goes to the batch through allocator.Reissue, which gives it a new
// generation (the victim's handle is then stale) without touching the free
// extents. The batch gets the reused blocks first, in eviction order, then
// blocks allocated from the free space for the rest. The count, and so the
// victims, are the same as if every victim were freed; what it saves is
// the free extents' work for each victim, twice: the Free that merges the
// block and the allocation that carves it again (on the conversation
// trace at a tenth of its blocks nearly every store evicts, and those two
// were about half of l1's time). Contiguous and ContiguousFirst placement
// free every victim, since a run may form only from freed blocks. When the
// allocator has no free byte as eviction begins (a full pool, the common
// case of a cache that evicts on demand), no victim has a free neighbour
// there, and FreeAround is not asked: one Stats call instead of a call
// per victim. (Memory that another user of a shared allocator frees
// meanwhile, or that a GrowingRegion adds, can then make the count low by
// the objects a merge with it would have added, and a victim more than
// needed is evicted. The shortcut never makes the count high: a victim
// that is not reused is freed into the runs, which are exact. Memory that
// another user takes meanwhile can, as on every path; the allocation then
// fails and the call falls back to the prefix.)
//
// When the allocator cannot hold the batch whatever the manager evicts
// from it (its capacity less the bytes in the manager's own objects is
// short: knownShortLocked), ReserveWrite starts with eviction, without the
// allocation call that must fail.

// evictableLocked is the eviction predicate.
func evictableLocked[K comparable](o *object[K], now int64) bool {
	return o.finished && !o.write.held(now) && !o.read.held(now)
}

// IsEvictable reports whether key exists, has been written and holds no
// live lock. Unlike LMCache's is_key_evictable, it
// reads under the manager lock.
func (m *Manager[K]) IsEvictable(key K) bool {
	now := m.lock()
	defer m.unlock()
	o := m.lookupLocked(&key, now)
	return o != nil && evictableLocked(o, now)
}

// evictForLocked evicts until n objects of size bytes fit, and returns
// them allocated; nil when it ran out of victims first. The call's own keys
// carry its stamp and are never evicted.
func (m *Manager[K]) evictForLocked(size int64, n int, now int64) ([]allocator.Block, error) {
	defer m.ev.restore()
	if m.coal != nil && m.fit != nil {
		return m.evictCountedLocked(size, n)
	}
	useFit := m.fit != nil && m.cfg.Placement != allocator.Contiguous
	for evicted := false; !useFit || !evicted || m.fit.Fit(size, n) < n; {
		v := m.nextVictimLocked()
		if v == nil {
			return nil, nil
		}
		m.evictLocked(v, true)
		m.flushLocked() // Fit and Stats must see the block free
		evicted = true
		if !useFit && m.mem.Stats().Free/size >= int64(n) {
			blocks, err := m.allocBatchLocked(size, n)
			if err == nil || !isOOM(err) {
				return blocks, err
			}
		}
	}
	blocks, err := m.allocBatchLocked(size, n)
	if err != nil && isOOM(err) {
		return nil, nil
	}
	return blocks, err
}

// freeRuns are the free runs on-demand eviction has planned so far: each
// victim's block merged with its free neighbours and earlier victims. A
// call usually has few victims, so the live runs are searched end to end;
// past freeRunsLinear runs, a table indexes them by both ends, and a run
// absorbed into a larger one is then marked dead, not removed: the table
// keeps its stale entries, and a lookup checks that the run it finds is
// live and has that end.
type freeRuns struct {
	runs []freeRun
	live int
	idx  runIndex
}

type freeRun struct {
	start, end int64
	dead       bool
}

// freeRunsLinear is the most runs searched without the table.
const freeRunsLinear = 32

func (r *freeRuns) reset() {
	r.runs, r.live = r.runs[:0], 0
	r.idx.reset()
}

// find returns the live run whose start (or end) is off, or -1.
func (r *freeRuns) find(off int64, end bool) int {
	match := func(x freeRun) bool { return !x.dead && (end && x.end == off || !end && x.start == off) }
	if r.idx.n > 0 {
		if i := r.idx.get(off); i >= 0 && match(r.runs[i]) {
			return int(i)
		}
		return -1
	}
	for i, x := range r.runs {
		if match(x) {
			return i
		}
	}
	return -1
}

// drop removes run i: while the runs are searched end to end, by moving
// the last into its place; once they are indexed, by marking it dead.
func (r *freeRuns) drop(i int) {
	r.live--
	if r.idx.n > 0 {
		r.runs[i].dead = true
		return
	}
	last := len(r.runs) - 1
	r.runs[i] = r.runs[last]
	r.runs = r.runs[:last]
}

// add appends a run, indexing every live run once there are too many to
// search.
func (r *freeRuns) add(x freeRun) {
	r.runs = append(r.runs, x)
	r.live++
	switch i := int32(len(r.runs) - 1); {
	case r.idx.n > 0:
		r.idx.put(x.start, i)
		r.idx.put(x.end, i)
	case r.live > freeRunsLinear:
		for j, y := range r.runs {
			if !y.dead {
				r.idx.put(y.start, int32(j))
				r.idx.put(y.end, int32(j))
			}
		}
	}
}

// runIndex is an open-addressing table from byte offsets to run numbers,
// without deletion: it lives for one eviction.
type runIndex struct {
	keys []int64 // -1: empty
	vals []int32
	n    int
}

func (t *runIndex) reset() {
	if t.n > 0 {
		for i := range t.keys {
			t.keys[i] = -1
		}
		t.n = 0
	}
}

func (t *runIndex) slot(k int64) int {
	mask := len(t.keys) - 1
	i := int(uint64(k)*0x9E3779B97F4A7C15>>32) & mask
	for t.keys[i] != -1 && t.keys[i] != k {
		i = (i + 1) & mask
	}
	return i
}

func (t *runIndex) get(k int64) int32 {
	if len(t.keys) == 0 {
		return -1
	}
	if i := t.slot(k); t.keys[i] == k {
		return t.vals[i]
	}
	return -1
}

func (t *runIndex) put(k int64, v int32) {
	if 2*(t.n+1) > len(t.keys) {
		old, oldv := t.keys, t.vals
		size := max(256, 2*len(old))
		t.keys, t.vals = make([]int64, size), make([]int32, size)
		for i := range t.keys {
			t.keys[i] = -1
		}
		t.n = 0
		for i, ok := range old {
			if ok != -1 {
				t.put(ok, oldv[i])
			}
		}
	}
	i := t.slot(k)
	if t.keys[i] == -1 {
		t.n++
	}
	t.keys[i], t.vals[i] = k, v
}

// evictCountedLocked is evictForLocked over a Coalescer (see Eviction).
// Over the allocator itself with Scattered placement, a victim whose block
// is exactly one object's size and would add exactly one object to the
// free space (no merge with its neighbours makes room for more) is not
// freed: its block goes to the batch through Reissue, and the rest of the
// batch is allocated from the free space (see reuseLocked).
func (m *Manager[K]) evictCountedLocked(size int64, n int) ([]allocator.Block, error) {
	z := roundUp(size, m.align)
	contiguous := m.cfg.Placement == allocator.Contiguous
	reuse := m.alloc != nil && m.cfg.Placement == allocator.Scattered
	// full: the allocator had no free byte when the eviction began. The
	// victims' blocks are freed only after it, so no victim then has a
	// free neighbour in the allocator (only earlier victims, in the runs),
	// and FreeAround need not be asked.
	full := reuse && m.alloc.Stats().Free == 0
	var have, need int64
	switch {
	case contiguous:
		have, need = m.mem.Stats().LargestFree, int64(n)*z
	case full:
		have, need = 0, int64(n)
	default:
		have, need = int64(m.fit.Fit(size, n)), int64(n)
	}
	r := &m.runs
	r.reset()
	defer r.reset()
	m.reused = m.reused[:0]
	for have < need {
		v := m.nextVictimLocked()
		if v == nil {
			m.pending = append(m.pending, m.reused...)
			m.reused = m.reused[:0]
			return nil, nil
		}
		lo, hi := v.block.Offset, v.block.End()
		var before, after int64
		if !full {
			before, after = m.coal.FreeAround(v.block)
		}
		start, end := lo-before, hi+after
		li := r.find(lo, true)
		if li >= 0 {
			start = r.runs[li].start
		}
		if ri := r.find(hi, false); ri >= 0 {
			end = r.runs[ri].end
		}
		gain := (end-start)/z - (lo-start)/z - (end-hi)/z
		if reuse && hi-lo == z && gain == 1 {
			// The victim's block stays live and goes to the batch:
			// the free space, and the runs planned so far, are as
			// they were. Removing v put its block last in m.pending.
			m.evictLocked(v, true)
			last := len(m.pending) - 1
			m.reused = append(m.reused, m.pending[last])
			m.pending = m.pending[:last]
			have++
			continue
		}
		if li >= 0 {
			r.drop(li)
		}
		if ri := r.find(hi, false); ri >= 0 { // drop may have moved it
			r.drop(ri)
		}
		r.add(freeRun{start: start, end: end})
		if contiguous {
			have = max(have, end-start)
		} else {
			have += gain
		}
		m.evictLocked(v, true)
	}
	if len(m.reused) > 0 {
		return m.reuseLocked(size, n)
	}
	blocks, err := m.allocBatchLocked(size, n)
	if err != nil && isOOM(err) {
		return nil, nil
	}
	return blocks, err
}

// reuseLocked returns n blocks of size bytes: the victims' blocks in
// m.reused, reissued, then the rest allocated. When the allocator refuses
// either, the victims' blocks are freed like any other victim's: a refused
// Reissue (no valid reason, but the allocator may be closed) falls back to
// one batch of n, and a batch that no longer fits answers nil.
func (m *Manager[K]) reuseLocked(size int64, n int) ([]allocator.Block, error) {
	m.flushLocked()
	m.stats.AllocCalls++
	blocks, err := m.alloc.AppendReissue(m.blocks[:0], m.reused)
	m.blocks = blocks[:0]
	if err != nil {
		m.pending = append(m.pending, m.reused...)
		m.reused = m.reused[:0]
		blocks, err = m.allocBatchLocked(size, n)
		if err != nil && isOOM(err) {
			return nil, nil
		}
		return blocks, err
	}
	k := len(blocks)
	m.reused = m.reused[:0]
	if k < n {
		m.stats.AllocCalls++
		blocks, err = m.alloc.AppendBatch(blocks, size, n-k, m.cfg.Placement)
		m.blocks = blocks[:0]
		if err != nil {
			m.pending = append(m.pending, blocks[:k]...)
			if isOOM(err) {
				return nil, nil
			}
			return nil, err
		}
	}
	return blocks, nil
}

// nextVictimLocked returns the policy's next victim that the current
// ReserveWrite does not name, setting aside those it does; nil when none
// is left.
func (m *Manager[K]) nextVictimLocked() *object[K] {
	for {
		v := m.ev.victim()
		if v == nil || v.stamp != m.stamp {
			return v
		}
		m.ev.setAside(v)
	}
}

// evictLocked removes v, a victim.
func (m *Manager[K]) evictLocked(v *object[K], onDemand bool) {
	m.ev.evicted(v)
	m.removeLocked(v, CauseEvicted)
	if onDemand {
		m.stats.OnDemandEvictions++
	}
}

// touchLocked makes o most recently used; hit also counts a use for the
// policy (S3-FIFO's count) and clears the Partial hint, before the policy
// re-ranks o: a used object is ranked as one, not as a partial one.
func (m *Manager[K]) touchLocked(o *object[K], hit bool) {
	if hit {
		m.ev.hit(o)
	}
	m.useLocked(o)
	if o.evq != evNone {
		m.ev.used(o)
	}
}

// syncEvictLocked puts o in the policy's structures, or takes it out, as
// evictableLocked says. Every call that changes what the predicate reads
// calls it.
func (m *Manager[K]) syncEvictLocked(o *object[K], now int64) {
	if want := evictableLocked(o, now); want != (o.evq != evNone) {
		if want {
			m.ev.enter(o)
		} else {
			m.ev.leave(o)
		}
	}
}

// EvictTo evicts evictable objects, in the policy's order, until
// Usage's used/capacity (the bytes in the manager's objects over the
// memory's capacity) is at most ratio or nothing evictable is left, and
// returns how many it evicted.
//
// It is the primitive a background controller builds on. LMCache's loop,
// every second, evicts a fifth of its keys once usage reaches 0.8; with
// EvictTo a controller evicts by bytes instead, e.g. EvictTo(0.6) whenever
// Usage reaches 0.8.
//
// ratio must be in [0, 1]; otherwise the error wraps ErrInvalidArgument and
// nothing changes. After Close it returns ErrClosed.
func (m *Manager[K]) EvictTo(ratio float64) (int, error) {
	if !(ratio >= 0 && ratio <= 1) {
		return 0, fmt.Errorf("%w: ratio %v outside [0, 1]", ErrInvalidArgument, ratio)
	}
	m.lock()
	defer m.unlock()
	if m.closed {
		return 0, ErrClosed
	}
	m.flushLocked()
	limit := ratio * float64(m.mem.Stats().Capacity)
	n := 0
	for float64(m.held) > limit {
		v := m.ev.victim()
		if v == nil {
			break
		}
		m.evictLocked(v, false)
		n++
	}
	return n, nil
}
