package l1

import (
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// ObjectState is everything observable about one object, for tests,
// fuzzers and scenario runners that check the manager against a model.
type ObjectState struct {
	Block allocator.Block
	// Size is the size the last ReserveWrite asked for; Block.Size is that
	// rounded up by the memory.
	Size int64
	// WriteLocked: a write is reserved and not finished (and its lock has
	// not lapsed, or the object would be gone).
	WriteLocked bool
	// ReadLocks is the live read-lock count: 0 once the lock has lapsed.
	ReadLocks int
	// Temporary objects are removed when their last read lock is released.
	Temporary bool
	// Finished: a write of this object has been finished. A rewrite
	// reserved in ModeAll or ModeUpdate mode leaves it true while
	// WriteLocked.
	Finished bool
	// Evictable: Finished and no live lock.
	Evictable bool
	// WriteExpiry and ReadExpiry are when the locks lapse, by the clock's
	// last reading plus the time the lock has left; zero when the lock is
	// not held. They are computed from the manager's stored time, not from
	// a fresh reading, so a lock that no call changed reports the same
	// expiry, to the bit, until the clock jumps back (see tick). A lock
	// that never lapses (NoExpiry) reports the manager's start plus about
	// 292 years.
	WriteExpiry, ReadExpiry time.Time
	// WriteLease and ReadLease are the current holders' leases; 0 when
	// the lock is not held. They are for observers and tests: a holder
	// must present the lease its own call returned, never one read here.
	WriteLease, ReadLease Lease
}

// Entry is one object of a Snapshot.
type Entry[K comparable] struct {
	Key K
	ObjectState
}

// State returns the state of key's object, and false when there is none.
// Like every call that names a key, it first reclaims expired objects.
func (m *Manager[K]) State(key K) (ObjectState, bool) {
	now := m.lock()
	defer m.unlock()
	o := m.lookupLocked(&key, now)
	if o == nil {
		return ObjectState{}, false
	}
	return m.stateLocked(o, now), true
}

// Snapshot returns every object, least recently used first: the order
// EvictLRU evicts in (the other policies have their own, see
// EvictionPolicy). It first reclaims expired objects.
func (m *Manager[K]) Snapshot() []Entry[K] {
	now := m.lock()
	defer m.unlock()
	out := make([]Entry[K], 0, m.objects.n)
	for _, o := range m.byRecencyLocked() {
		// Normalizes lapsed read locks of ordinary objects, which the
		// sweep leaves alone.
		if m.checkLocked(o, now) {
			out = append(out, Entry[K]{Key: o.key, ObjectState: m.stateLocked(o, now)})
		}
	}
	return out
}

func (m *Manager[K]) stateLocked(o *object[K], now int64) ObjectState {
	s := ObjectState{
		Block:     o.block,
		Size:      o.size,
		Temporary: o.temporary,
		Finished:  o.finished,
		Evictable: evictableLocked(o, now),
	}
	if o.write.held(now) {
		s.WriteLocked = true
		s.WriteExpiry = m.base.Add(time.Duration(o.write.expiry))
		s.WriteLease = o.wlease
	}
	if o.read.held(now) {
		s.ReadLocks = int(o.read.count)
		s.ReadExpiry = m.base.Add(time.Duration(o.read.expiry))
		s.ReadLease = o.rlease
	}
	return s
}
