package l1

import (
	"math"
	"time"
)

// Lock counts and their lifetimes.
//
// A lock is a count and one expiry, as LMCache's TTLLock is: taking n holds
// adds n to the count (or sets it to n when the lock had lapsed) and moves
// the single expiry to now+TTL for every holder; releasing subtracts, with a
// floor at zero, and leaves the expiry alone. A lock is held while its count
// is positive and its expiry is in the future. Both operations are O(1),
// whatever the count: LMCache loops once per hold.
//
// One expiry for all holders is LMCache's semantics and is kept on purpose:
// a holder that keeps locking keeps everyone's holds alive, and a lapse
// drops every hold at once. Per-holder lifetimes would need one record per
// hold and are out of scope.
//
// What a lapse means differs by lock, and is where this package departs from
// LMCache, whose lapsed locks silently expose or strand objects:
//
//   - A lapsed write lock means the writer is gone and the buffer holds
//     unfinished data. The object is reclaimed: its block freed, its key
//     removed (EventRemoved, CauseExpired). It never becomes readable.
//     Under Config.QuarantineLapsedWrites the writer may still be writing:
//     the key is removed the same way (CauseQuarantined), but the block
//     is kept from every other writer until its owner lets go of it (see
//     quarantine.go).
//   - A lapsed read lock on a temporary object means its reader is gone and
//     nobody else may read it. It is reclaimed the same way, instead of
//     lingering until eviction.
//   - A lapsed read lock on an ordinary object just unlocks it.
//
// Reclaiming happens at the start of every call that takes the manager lock
// (Stats excepted): write-locked objects wait in a queue ordered by expiry,
// and read-locked temporary objects in another, so a sweep pops only what
// has expired and costs O(1) when nothing has (amortized: it also drops
// the entries of objects that left the queue, see expiry.go). The queues
// are ordered because every lock of a kind has the same TTL and the
// manager's time never goes backwards, even when the clock does (see
// tick).
//
// TTLs and time. Any TTL from 1 ns to math.MaxInt64 (NoExpiry) works: an
// expiry is now+TTL saturated at math.MaxInt64, and a lock whose expiry
// saturated never lapses. The manager keeps its own time: the sum of the
// clock's forward steps, saturated. A clock jumping backwards by any amount
// neither revives a lapsed lock nor lapses a live one; locks then lapse as
// the clock moves forward again by what remained of their TTL. A clock
// jumping forward by any amount lapses every lock with a finite TTL.
//
// Leases. Each hold is also named by a lease (see Lease): a write lock has
// the lease of the ReserveWrite that took it, and a read lock the epoch it
// got when it went from not held to held. A finishing call must present the
// lease; a stale one changes nothing (StaleLease).

// ttlLock is a hold count and one expiry, in nanoseconds of the manager's
// clock since the manager was made.
type ttlLock struct {
	count  int64
	expiry int64
}

// held reports whether the lock has holders whose lifetime has not run out.
func (l *ttlLock) held(now int64) bool { return l.count > 0 && now < l.expiry }

// lapsed reports whether the lock has holders whose lifetime has run out.
func (l *ttlLock) lapsed(now int64) bool { return l.count > 0 && now >= l.expiry }

// lock adds n holds and moves the expiry to now+ttl, saturated at
// math.MaxInt64 (never: see tick). Holds that had lapsed are dropped first.
func (l *ttlLock) lock(n int, now, ttl int64) {
	if !l.held(now) {
		l.count = 0
	}
	l.count += int64(n)
	l.expiry = satAdd(now, ttl)
}

// satAdd returns a+b for b ≥ 0, saturated at math.MaxInt64.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// endOfTime is the expiry of a lock that never lapses: the manager's
// clock stops one nanosecond short of it (see tick).
const endOfTime = math.MaxInt64

// tick reads the clock and advances the manager's time, in nanoseconds
// since New, by how far the clock moved forward since the last reading.
// A clock that jumps backwards leaves the manager's time where it was, and
// time moves on from there as the clock moves on, so the expiry queues stay
// ordered; a jump forward by any amount saturates. The manager's time stops
// one nanosecond before endOfTime, so a lock whose expiry saturated never
// lapses.
//
// It also keeps base, the clock's reading at manager time 0, from which
// State and Snapshot report expiries: base + now is the clock's last
// reading. A forward step leaves base alone, so an expiry reported twice
// across calls that did not change its lock reads the same, to the bit: a
// reading of the clock carries a wall and a monotonic time, which step
// differently, and an expiry computed as the last reading plus the time
// left would move with their difference. A backward jump, and a forward
// one that saturates, move base so that base + now is the reading again.
func (m *Manager[K]) tick() int64 {
	t := m.cfg.Now()
	if d := t.Sub(m.last); d > 0 {
		if n := satAdd(m.now, int64(d)); n < endOfTime-1 {
			m.now = n
		} else {
			m.now = endOfTime - 1
			m.base = t.Add(-time.Duration(m.now))
		}
	} else if d < 0 {
		m.base = t.Add(-time.Duration(m.now))
	}
	m.last = t
	return m.now
}

// unlock releases n holds, never going below zero.
func (l *ttlLock) unlock(n int) {
	l.count = max(0, l.count-int64(n))
	if l.count == 0 {
		l.expiry = 0
	}
}

// sweepLocked reclaims every object whose write lock has lapsed and every
// temporary object whose read lock has lapsed. The queues are ordered by
// expiry, so it stops at the first live lock.
func (m *Manager[K]) sweepLocked(now int64) {
	if now >= m.qnext {
		m.sweepQuarantineLocked(now)
	}
	for o := m.frontLocked(writeQueue); o != nil && o.write.lapsed(now); o = m.frontLocked(writeQueue) {
		m.expireWriteLocked(o)
	}
	for o := m.frontLocked(tempQueue); o != nil && o.read.lapsed(now); o = m.frontLocked(tempQueue) {
		m.removeLocked(o, CauseExpired)
	}
	// A lapsed read lock on any other object unlocks it, which counts as a
	// release: the object becomes recently used and, if it qualifies,
	// evictable.
	for o := m.frontLocked(readQueue); o != nil && o.read.lapsed(now); o = m.frontLocked(readQueue) {
		o.read = ttlLock{}
		m.dequeueLocked(o)
		m.touchLocked(o, false)
		m.syncEvictLocked(o, now)
	}
}

// lookupLocked returns the object for key, or nil, after applying lapsed
// locks to it: the check that backs up sweepLocked for keys a call names.
func (m *Manager[K]) lookupLocked(key *K, now int64) *object[K] {
	o, _ := m.lookupHashLocked(key, m.objects.hash(key), now)
	return o
}

// lookupHashLocked is lookupLocked for a key whose hash is h. When it
// returns nil, the int is where the index would put key.
func (m *Manager[K]) lookupHashLocked(key *K, h uint32, now int64) (*object[K], int) {
	o, pos := m.objects.find(key, h)
	if o == nil {
		return nil, pos
	}
	if !o.anyLapsed(now) || m.lapseLocked(o, now) {
		return o, pos
	}
	// o left a hole in the probe run: find where key goes now.
	_, pos = m.objects.find(key, h)
	return nil, pos
}

// checkLocked applies lapsed locks to o and reports whether it survived.
func (m *Manager[K]) checkLocked(o *object[K], now int64) bool {
	return !o.anyLapsed(now) || m.lapseLocked(o, now)
}

// anyLapsed reports whether o holds a lapsed lock: the lookups test it
// inline and call lapseLocked only then.
func (o *meta) anyLapsed(now int64) bool { return o.write.lapsed(now) || o.read.lapsed(now) }

// lapseLocked is checkLocked for an object with a lapsed lock.
func (m *Manager[K]) lapseLocked(o *object[K], now int64) bool {
	if o.write.lapsed(now) {
		m.expireWriteLocked(o)
		return false
	}
	if o.read.lapsed(now) {
		if o.temporary {
			m.removeLocked(o, CauseExpired)
			return false
		}
		o.read = ttlLock{}
		m.dequeueLocked(o)
		m.syncEvictLocked(o, now)
	}
	return true
}
