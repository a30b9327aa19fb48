package l1

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
)

// Eviction.
//
// Every object is on one LRU list; ReserveWrite, FinishWrite,
// FinishWriteAndReserveRead, ReserveRead and Touch make an object most
// recently used. An object is evictable when its write has finished and it
// holds no live lock, read or write: LMCache's predicate. Temporary objects
// are no exception: a temporary object that is read-locked waits for its
// reader, but one finished with FinishWrite and never read holds no lock,
// so no TTL would ever reclaim it, and only eviction returns its memory
// (as in LMCache). One whose read lock lapses is reclaimed (see lock.go).
//
// Two paths evict, both synchronous and under the manager lock:
//   - on demand, inside ReserveWrite when Config.EvictOnDemand is set and
//     a batch does not fit (LMCache PR #5290's proposal): least recently
//     used first, skipping the call's own keys, until the batch fits;
//   - EvictTo, which a background controller calls on its own schedule.
//
// Both walk the LRU list from its cold end once, skipping objects that are
// locked, so a call costs O(objects visited).

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
// them allocated; nil when it ran out of victims first. With a Fitter (and
// placement other than Contiguous, which Fit does not model) it checks Fit
// after each eviction; otherwise it retries the allocation after each
// eviction that leaves at least n×size bytes free.
//
// The call's own keys carry its stamp and are never evicted.
func (m *Manager[K]) evictForLocked(size int64, n int, now int64) ([]allocator.Block, error) {
	useFit := m.fit != nil && m.cfg.Placement != allocator.Contiguous
	evicted := false
	for v := m.lru.front(); ; {
		if useFit && evicted && m.fit.Fit(size, n) >= n {
			break
		}
		for v != nil && (!evictableLocked(v, now) || v.stamp == m.stamp) {
			v = m.lru.after(v)
		}
		if v == nil {
			return nil, nil
		}
		next := m.lru.after(v)
		m.removeLocked(v, CauseEvicted)
		m.flushLocked() // Fit and Stats must see the block free
		m.stats.OnDemandEvictions++
		evicted = true
		v = next
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

// EvictTo evicts evictable objects, least recently used first, until
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
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return 0, ErrClosed
	}
	m.flushLocked()
	limit := ratio * float64(m.mem.Stats().Capacity)
	n := 0
	for v := m.lru.front(); v != nil && float64(m.held) > limit; {
		next := m.lru.after(v)
		if evictableLocked(v, now) {
			m.removeLocked(v, CauseEvicted)
			n++
		}
		v = next
	}
	return n, nil
}
