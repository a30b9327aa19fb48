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
// a short slice, indexed by maps once it is long), holds ⌊merged/size⌋ objects where the parts held ⌊left/size⌋ +
// ⌊right/size⌋. For Contiguous placement the count is the longest run
// instead. It stops at the first victim that makes the batch fit, frees the
// victims in one Free call and allocates: O(1) per victim and one walk of
// the free extents per call, so scattered victims cost what adjacent ones
// do. Over other memories it checks Fit after each victim, or, without
// Fit, retries the allocation whenever the free bytes would allow it.

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
	o := m.lookupLocked(key, now)
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
// call usually has few victims, so the runs are a slice searched end to
// end; past freeRunsLinear runs, maps index them by both ends.
type freeRuns struct {
	runs           []freeRun
	byStart, byEnd map[int64]int // run index by start and by end offset
}

type freeRun struct{ start, end int64 }

// freeRunsLinear is the most runs searched without the maps.
const freeRunsLinear = 32

func (r *freeRuns) reset() {
	r.runs = r.runs[:0]
	if r.byStart != nil {
		clear(r.byStart)
		clear(r.byEnd)
	}
}

// ending returns the run that ends at off, or -1.
func (r *freeRuns) ending(off int64) int {
	if len(r.runs) > freeRunsLinear {
		if i, ok := r.byEnd[off]; ok {
			return i
		}
		return -1
	}
	for i, x := range r.runs {
		if x.end == off {
			return i
		}
	}
	return -1
}

// starting returns the run that starts at off, or -1.
func (r *freeRuns) starting(off int64) int {
	if len(r.runs) > freeRunsLinear {
		if i, ok := r.byStart[off]; ok {
			return i
		}
		return -1
	}
	for i, x := range r.runs {
		if x.start == off {
			return i
		}
	}
	return -1
}

// drop removes run i, moving the last run into its place.
func (r *freeRuns) drop(i int) {
	x := r.runs[i]
	indexed := len(r.runs) > freeRunsLinear
	if indexed {
		delete(r.byStart, x.start)
		delete(r.byEnd, x.end)
	}
	last := len(r.runs) - 1
	if i != last {
		r.runs[i] = r.runs[last]
		if indexed {
			r.byStart[r.runs[i].start], r.byEnd[r.runs[i].end] = i, i
		}
	}
	r.runs = r.runs[:last]
	if indexed && len(r.runs) <= freeRunsLinear {
		clear(r.byStart)
		clear(r.byEnd)
	}
}

// add appends a run, indexing every run once there are too many to search.
func (r *freeRuns) add(x freeRun) {
	r.runs = append(r.runs, x)
	n := len(r.runs)
	switch {
	case n <= freeRunsLinear:
	case n == freeRunsLinear+1:
		if r.byStart == nil {
			r.byStart, r.byEnd = map[int64]int{}, map[int64]int{}
		}
		for i, y := range r.runs {
			r.byStart[y.start], r.byEnd[y.end] = i, i
		}
	default:
		r.byStart[x.start], r.byEnd[x.end] = n-1, n-1
	}
}

// evictCountedLocked is evictForLocked over a Coalescer (see Eviction).
func (m *Manager[K]) evictCountedLocked(size int64, n int) ([]allocator.Block, error) {
	align := m.coal.Align()
	z := (size + align - 1) / align * align
	contiguous := m.cfg.Placement == allocator.Contiguous
	var have, need int64
	if contiguous {
		have, need = m.mem.Stats().LargestFree, int64(n)*z
	} else {
		have, need = int64(m.fit.Fit(size, n)), int64(n)
	}
	r := &m.runs
	r.reset()
	defer r.reset()
	for have < need {
		v := m.nextVictimLocked()
		if v == nil {
			return nil, nil
		}
		lo, hi := v.block.Offset, v.block.End()
		before, after := m.coal.FreeAround(v.block)
		start, end := lo-before, hi+after
		if i := r.ending(lo); i >= 0 {
			start = r.runs[i].start
			r.drop(i)
		}
		if i := r.starting(hi); i >= 0 {
			end = r.runs[i].end
			r.drop(i)
		}
		r.add(freeRun{start, end})
		if contiguous {
			have = max(have, end-start)
		} else {
			have += (end-start)/z - (lo-start)/z - (end-hi)/z
		}
		m.evictLocked(v, true)
	}
	blocks, err := m.allocBatchLocked(size, n)
	if err != nil && isOOM(err) {
		return nil, nil
	}
	return blocks, err
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
// policy (S3-FIFO's count).
func (m *Manager[K]) touchLocked(o *object[K], hit bool) {
	m.lru.moveToBack(o)
	if o.evq != evNone {
		m.ev.used(o)
	}
	if hit {
		m.ev.hit(o)
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
