package l1

import (
	"cmp"
	"slices"
)

// Recency.
//
// Snapshot lists the objects least recently used first, and Clear removes
// them in that order. The order is kept as a stamp, not a list: the manager
// counts uses (Manager.clock), and each use of an object (it is reserved,
// finished, read-locked, released or touched, or its read lock lapses; see
// policy.go) stamps it with the next count (object.used). A use then costs
// one store to the object itself, where a list that held every object cost
// an unlink and an append, three records touched. Snapshot and Clear sort
// the live objects by stamp, O(n log n) where a list walk was O(n): they
// visit every object anyway, and the calls that use objects are the hot
// ones. Stamps are unique (a 64-bit count does not wrap), so the order is
// the one a list would keep. The eviction policies keep their own lists
// of the evictable objects (policy.go).

// useLocked makes o the most recently used object.
func (m *Manager[K]) useLocked(o *object[K]) {
	m.clock++
	o.used = m.clock
}

// byRecencyLocked returns every object, least recently used first.
func (m *Manager[K]) byRecencyLocked() []*object[K] {
	out := make([]*object[K], 0, m.objects.n)
	for _, sl := range m.objects.slots {
		if sl.rec != 0 {
			out = append(out, m.objects.rec(sl.rec))
		}
	}
	slices.SortFunc(out, func(a, b *object[K]) int { return cmp.Compare(a.used, b.used) })
	return out
}
