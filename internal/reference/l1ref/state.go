package l1ref

import (
	"maps"

	"github.com/kvalloc/kvalloc/l1"
)

// State models l1.Manager.State.
func (m *Manager[K]) State(key K) (l1.ObjectState, bool) {
	m.Sweep()
	o := m.objects[key]
	if o == nil {
		return l1.ObjectState{}, false
	}
	return m.state(o), true
}

// Snapshot models l1.Manager.Snapshot: every object, least recently used
// first.
func (m *Manager[K]) Snapshot() []l1.Entry[K] {
	m.Sweep()
	out := []l1.Entry[K]{}
	for _, k := range m.lru() {
		out = append(out, l1.Entry[K]{Key: k, ObjectState: m.state(m.objects[k])})
	}
	return out
}

// state is o's l1.ObjectState: an expiry is the clock's last reading plus
// the time the lock has left, as l1 reports it; blocks carry no
// generation (see New).
func (m *Manager[K]) state(o *object) l1.ObjectState {
	s := l1.ObjectState{Block: o.block, Size: o.size, Temporary: o.temporary, Finished: o.finished, Evictable: o.evictable(m.Now)}
	last := m.Cfg.Epoch.Add(m.seen)
	if o.write.held(m.Now) {
		s.WriteLocked, s.WriteExpiry, s.WriteLease = true, last.Add(o.write.expiry-m.Now), o.wlease
	}
	if o.read.held(m.Now) {
		s.ReadLocks, s.ReadExpiry, s.ReadLease = int(o.read.n), last.Add(o.read.expiry-m.Now), o.rlease
	}
	return s
}

// The rest reads what l1's Stats reports, without sweeping, as Stats does.

// Len is the number of objects, like Stats.Objects.
func (m *Manager[K]) Len() int { return len(m.objects) }

// WriteLocked counts the objects with a write lock, lapsed or not, like
// Stats.WriteLocked.
func (m *Manager[K]) WriteLocked() int {
	n := 0
	for _, o := range m.objects {
		if o.write.n > 0 {
			n++
		}
	}
	return n
}

// TemporaryReadLocked counts temporary objects with read holds, lapsed or
// not, like Stats.TemporaryReadLocked.
func (m *Manager[K]) TemporaryReadLocked() int {
	n := 0
	for _, o := range m.objects {
		if o.temporary && o.read.n > 0 {
			n++
		}
	}
	return n
}

// Quarantine returns the number of held blocks (lapsed writes, and keys
// deleted under live locks) and their bytes, like Stats.QuarantinedObjects
// and QuarantinedBytes.
func (m *Manager[K]) Quarantine() (objects int, bytes int64) {
	for _, q := range m.quarantine {
		bytes += q.Block.Size
	}
	return len(m.quarantine), bytes
}

// QuarantinedWrites returns the quarantine, by lease: every block held for
// a lapsed write or a deleted key's live lease.
func (m *Manager[K]) QuarantinedWrites() map[l1.Lease]Quarantined[K] { return maps.Clone(m.quarantine) }

// Counted returns the counters of c that the model keeps, the others
// zero: AllocCalls, FreeErrors and PeakPendingEvents depend on the memory
// and the listeners, which the model does not follow.
func Counted(c l1.Counters) l1.Counters {
	c.AllocCalls, c.FreeErrors, c.PeakPendingEvents = 0, 0, 0
	return c
}
