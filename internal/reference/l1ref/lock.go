package l1ref

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// lock is a hold count and one expiry: LMCache's TTLLock. An expiry of
// math.MaxInt64 (a saturated now+ttl) is never reached: the model's time
// stops one nanosecond short of it (see observe).
type lock struct {
	n      int64
	expiry time.Duration
}

// satAdd is a+b for b ≥ 0, saturated at math.MaxInt64.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (l lock) held(now time.Duration) bool   { return l.n > 0 && now < l.expiry }
func (l lock) lapsed(now time.Duration) bool { return l.n > 0 && now >= l.expiry }

func (l *lock) take(n int, now, ttl time.Duration) {
	if !l.held(now) {
		l.n = 0
	}
	l.n += int64(n)
	l.expiry = satAdd(now, ttl)
}

func (l *lock) release(n int) {
	l.n = max(0, l.n-int64(n))
	if l.n == 0 {
		l.expiry = 0
	}
}

// AddClock returns the clock reading c moved by d, either way, saturated
// at the int64 range of nanoseconds. l1check's clock moves the same way.
func AddClock(c, d time.Duration) time.Duration {
	next := c + d
	switch {
	case d > 0 && next < c:
		return math.MaxInt64
	case d < 0 && next > c:
		return math.MinInt64
	}
	return next
}

// Advance moves the clock by d, either way (see AddClock). The manager's
// time moves at the next call that reads the clock (see observe).
func (m *Manager[K]) Advance(d time.Duration) { m.Clock = AddClock(m.Clock, d) }

// observe is l1's tick: the manager's time moves by how far the clock moved
// forward since the last call read it, saturated, and stops one nanosecond
// short of math.MaxInt64, so a saturated expiry is never reached.
func (m *Manager[K]) observe() {
	if m.Clock > m.seen {
		step := m.Clock - m.seen
		if step < 0 { // the difference overflows: saturate, as time.Sub does
			step = math.MaxInt64
		}
		m.Now = min(satAdd(m.Now, step), math.MaxInt64-1)
	}
	m.seen = m.Clock
}

// Sweep reads the clock (see observe), then reclaims every object whose
// write lock lapsed and every temporary object whose read lock lapsed, and
// drops lapsed read holds of the rest. Every manager call but Stats and
// Usage begins with it. A dropped read lock counts as a release: the
// object becomes most recently used, the earliest expiry first, ties in
// the order the locks were last taken. Under QuarantineLapsedWrites a
// lapsed write drops its key and keeps its block taken, by lease. A block
// held for a deleted key's lease is freed once that lease's expiry has
// passed.
func (m *Manager[K]) Sweep() {
	m.syncPolicy() // the last call's changes, at the clock they saw
	m.observe()
	m.opN++
	defer m.syncPolicy()
	for l, q := range m.quarantine {
		if q.Expiry <= m.Now { // a deleted key's holder's lock lapsed
			m.Mem.Release([]allocator.Block{q.Block})
			delete(m.quarantine, l)
		}
	}
	var lapsed []K
	for k, o := range m.objects {
		switch {
		case o.write.lapsed(m.Now) && m.Cfg.QuarantineLapsedWrites:
			m.quarantine[o.wlease] = Quarantined[K]{Key: k, Block: o.block, Expiry: math.MaxInt64}
			delete(m.objects, k)
			m.Counters.Expired++
			m.Counters.Quarantines++
		case o.write.lapsed(m.Now), o.temporary && o.read.lapsed(m.Now):
			m.remove(k)
			m.Counters.Expired++
		case o.read.lapsed(m.Now):
			lapsed = append(lapsed, k)
		}
	}
	slices.SortFunc(lapsed, func(a, b K) int {
		oa, ob := m.objects[a], m.objects[b]
		return cmp.Or(cmp.Compare(oa.read.expiry, ob.read.expiry), cmp.Compare(oa.readSeq, ob.readSeq))
	})
	for _, k := range lapsed {
		o := m.objects[k]
		o.read = lock{}
		m.touch(o)
	}
}
