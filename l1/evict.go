package l1

import (
	"fmt"
	"math"

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
//     a batch does not fit (LMCache evicts only from a 1 s poll above a
//     watermark, which a batch can miss entirely): in the policy's order,
//     skipping the call's own keys, until the batch fits;
//   - EvictTo, which a background controller calls on its own schedule.
//
// Neither visits an object that is not evictable, so a call costs
// O(victims), plus the call's own keys when the policy reaches them.
//
// Stopping as soon as the batch fits. The victims are those of the plain
// loop "free the next victim in policy order, then ask Fit, until the
// batch fits", whatever sizes share the pool. On-demand eviction frees
// the blocks that lapsed locks released, asks Fit once how many objects fit, then counts
// what each victim adds without freeing anything: the victim's block,
// merged with the free extents on either side (from FreeAround) and with
// the runs of earlier victims of the same call (freeruns.go), holds
// ⌊merged/size⌋ objects where the parts held ⌊left/size⌋ + ⌊right/size⌋.
// For Contiguous placement the count is the longest run instead. It stops
// at the first victim that makes the batch fit, frees the victims in one
// Free call and allocates: O(1) per victim and one walk of the free
// extents per call, so scattered victims cost what adjacent ones do. When
// the allocation fails all the same (below), it goes on with the plain
// loop itself: Fit after each victim, or under Contiguous placement a
// retry whenever the free bytes would allow it.
//
// Reusing victims' blocks. With Scattered placement, once the victims are chosen, a victim whose block
// is exactly one object of the batch's size and starts a multiple of that
// size into its free run (the victims' blocks merged with each other and
// with their free neighbours) is not freed: its block goes to the batch
// through allocator.Reissue, which gives it a new generation (the victim's
// handle is then stale) without touching the free extents. Such a block is
// where a scattered allocation carving the run from its front could put an
// object, so the pieces it leaves hold the rest: the batch gets the reused
// blocks first, in eviction order, then blocks allocated from the free
// space for the rest, and the victims are the plain loop's. (Deciding
// victim by victim, keeping every block that added exactly one object,
// kept live a block that a later victim would have merged with into room
// for more, and evicted one victim too many.) What reuse saves is the free
// extents' work for each victim, twice: the Free that merges the block and
// the allocation that carves it again (on the conversation trace at a
// tenth of its blocks nearly every store evicts, and those two were about
// half of l1's time). Contiguous and ContiguousFirst placement free every
// victim, since a run may form only from freed blocks. When the memory has
// no free byte as eviction begins (a full pool, the common case of a cache
// that evicts on demand), no victim has a free neighbour there, and
// FreeAround is not asked: one Stats call instead of a call per victim.
// (Memory that another user of a shared allocator frees meanwhile, or that
// a GrowingRegion adds, can then make the count low by the objects a merge
// with it would have added, and a victim more than needed is evicted. The
// shortcut never makes the count high. Memory that another user takes
// meanwhile can, as can a memory whose FreeAround misreports; the
// allocation then fails, and eviction goes on with the plain loop, victim
// by victim, until the batch fits or no victim is left.)
//
// ReserveWrite with on-demand eviction starts with eviction's count, which
// asks what fits now, so a batch makes one allocation call, after the
// victims it needs, and none when nothing it may evict makes room: no
// call fails first.

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
// carry its stamp and are never evicted. The count rests on the memory's
// answers (Fit, FreeAround) and on nobody else changing
// it meanwhile; when its allocation fails all the same (another user of a
// shared allocator took the memory, or the memory misreported), eviction
// goes on with the plain loop, which asks after every victim.
func (m *Manager[K]) evictForLocked(size int64, n int, now int64) ([]allocator.Block, error) {
	defer m.ev.restore()
	// Blocks removed before eviction (objects whose locks lapsed as the
	// call began) are free before the count starts.
	m.flushLocked()
	st := m.mem.Stats()
	m.ev.sized(st.Capacity)
	if size > st.Capacity {
		return nil, nil // larger than all the memory usable now
	}
	if blocks, err := m.evictCountedLocked(size, n, st); blocks != nil || err != nil {
		return blocks, err
	}
	return m.evictPlainLocked(size, n)
}

// evictPlainLocked is the plain loop: free the next victim, then ask Fit
// (or, under Contiguous placement, try the batch whenever the free bytes
// would allow it), until the batch fits. It runs when the count's
// allocation failed (see evictForLocked), so its first victim goes at
// once.
func (m *Manager[K]) evictPlainLocked(size int64, n int) ([]allocator.Block, error) {
	useFit := m.cfg.Placement != allocator.Contiguous
	for evicted := false; !useFit || !evicted || m.mem.Fit(size, n) < n; {
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

// evictCountedLocked is evictForLocked's count (see Eviction): it counts
// what each victim frees instead of asking Fit, and stops at the first
// victim that makes the batch fit, so its victims are those of the plain
// loop. With Scattered placement, the victims' blocks that change nothing by staying live go to the batch
// through Reissue (see reusableLocked and reuseLocked).
//
// st is the memory's Stats as eviction begins, the blocks of objects
// removed before it already freed.
func (m *Manager[K]) evictCountedLocked(size int64, n int, st allocator.Stats) ([]allocator.Block, error) {
	z := roundUp(size, m.align)
	contiguous := m.cfg.Placement == allocator.Contiguous
	// full: the memory had no free byte when the eviction began. The
	// victims' blocks are freed only after it, so no victim then has a
	// free neighbour in the memory (only earlier victims, in the runs),
	// and FreeAround need not be asked.
	full := st.Free == 0
	var have, need int64
	switch {
	case contiguous:
		have, need = st.LargestFree, int64(n)*z
	case full:
		have, need = 0, int64(n)
	default:
		have, need = int64(min(max(m.mem.Fit(size, n), 0), n)), int64(n)
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
		var before, after int64
		if !full {
			before, after = m.mem.FreeAround(v.block)
			// Free space lies in [0, lo) and after hi; a larger or
			// negative answer is the memory's error, taken as nothing
			// free (the plain loop corrects a count that comes out high).
			if before < 0 || before > lo {
				before = 0
			}
			if after < 0 || after > math.MaxInt64-hi {
				after = 0
			}
		}
		x := r.merge(lo, hi, lo-before, hi+after)
		if contiguous {
			have = max(have, x.end-x.start)
		} else {
			// The run holds ⌊run/z⌋ objects where its parts held
			// ⌊left/z⌋ + ⌊right/z⌋.
			have += (x.end-x.start)/z - (lo-x.start)/z - (x.end-hi)/z
		}
		m.evictLocked(v, true) // its block joins m.pending, in eviction order
	}
	if m.cfg.Placement == allocator.Scattered && m.reusableLocked(z, n) {
		return m.reuseLocked(size, n)
	}
	blocks, err := m.allocBatchLocked(size, n)
	if err != nil && isOOM(err) {
		return nil, nil
	}
	return blocks, err
}

// reusableLocked moves from m.pending, the victims' blocks in eviction
// order, to m.reused those that the batch can take as they are, and
// reports whether there are any: a block of exactly one object (z bytes)
// that starts a multiple of z bytes into its free run, where a scattered
// allocation carving the run from its front could put an object. Kept
// live, such blocks cut their runs into pieces that still hold, with them,
// as many objects as the whole runs: the count, and so the victims, stay
// those of the plain loop. (A block that merely adds one object to the
// free space, counted alone, may keep a later victim from merging with it
// into room for more.)
func (m *Manager[K]) reusableLocked(z int64, n int) bool {
	kept := m.pending[:0]
	m.reused = m.reused[:0]
	for v, b := range m.pending {
		if b.Size == z && len(m.reused) < n && (b.Offset-m.runs.start(v))%z == 0 {
			m.reused = append(m.reused, b)
		} else {
			kept = append(kept, b)
		}
	}
	m.pending = kept
	return len(m.reused) > 0
}

// reuseLocked returns n blocks of size bytes: the victims' blocks in
// m.reused, reissued, then the rest allocated. When the allocator refuses
// either, the victims' blocks are freed like any other victim's: a refused
// Reissue (no valid reason, but the allocator may be closed) falls back to
// one batch of n, and a batch that no longer fits answers nil.
func (m *Manager[K]) reuseLocked(size int64, n int) ([]allocator.Block, error) {
	m.flushLocked()
	m.stats.AllocCalls++
	blocks, err := m.mem.AppendReissue(m.blocks[:0], m.reused)
	m.blocks = blocks[:0]
	if err == nil && !sameExtents(blocks, m.reused) {
		// The memory broke Reissue's contract: give back what it returned.
		want := len(m.reused)
		m.reused = m.reused[:0]
		m.freeLocked(blocks)
		return nil, fmt.Errorf("l1: memory reissued %d blocks for %d, or other extents", len(blocks), want)
	}
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
		blocks, err = m.mem.AppendBatch(blocks, size, n-k, m.cfg.Placement)
		m.blocks = blocks[:0]
		if err == nil && len(blocks) != n {
			m.freeLocked(blocks)
			return nil, fmt.Errorf("l1: memory returned %d blocks for a batch of %d", len(blocks)-k, n-k)
		}
		if err != nil {
			m.pending = append(m.pending, blocks[:k]...)
			if isOOM(err) {
				return nil, nil
			}
			return nil, err
		}
		if err := m.checkSizesLocked(blocks[k:], size); err != nil {
			m.pending = append(m.pending, blocks[:k]...)
			return nil, err
		}
	}
	return blocks, nil
}

// sameExtents reports whether got holds the extents of want, in order.
func sameExtents(got, want []allocator.Block) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Offset != want[i].Offset || got[i].Size != want[i].Size {
			return false
		}
	}
	return true
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
	capacity := m.mem.Stats().Capacity
	m.ev.sized(capacity)
	limit := ratio * float64(capacity)
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
