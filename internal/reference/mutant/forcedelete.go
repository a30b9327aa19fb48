package mutant

import "github.com/kvalloc/kvalloc/l1"

// ForceDeleteFreesAtOnce is a manager whose forced Delete and Clear free a
// locked object's block at once, as LMCache's did and this one did before
// the rule that no block is freed, reissued or evicted while a lease on it
// is live: the block goes to the next writer while its writer or readers
// still use it, and their late calls find nothing of theirs (KeyNotExist
// or StaleLease, where the rule answers WriteDeleted or OK). It deletes,
// then lets go of every lease the deleted keys' locks had, as their
// holders would, so l1 frees the held blocks in the same call.
type ForceDeleteFreesAtOnce[K comparable] struct{ *l1.Manager[K] }

// Delete deletes, then frees the blocks held for the locks of the keys it
// deleted with force.
func (m ForceDeleteFreesAtOnce[K]) Delete(keys []K, force bool) ([]l1.Status, error) {
	var locked []l1.Entry[K]
	if force {
		locked = lockedEntries(m.Manager, keys)
	}
	sts, err := m.Manager.Delete(keys, force)
	if err == nil {
		FreeHeldAtOnce(m.Manager, locked)
	}
	return sts, err
}

// Clear clears, then, with force, frees the blocks held for the locks of
// the objects it removed.
func (m ForceDeleteFreesAtOnce[K]) Clear(force bool) int {
	var locked []l1.Entry[K]
	if force {
		for _, e := range m.Snapshot() {
			if e.WriteLocked || e.ReadLocks > 0 {
				locked = append(locked, e)
			}
		}
	}
	n := m.Manager.Clear(force)
	FreeHeldAtOnce(m.Manager, locked)
	return n
}

// lockedEntries returns the states of the keys' locked objects, each once.
func lockedEntries[K comparable](m *l1.Manager[K], keys []K) []l1.Entry[K] {
	var out []l1.Entry[K]
	seen := map[K]bool{}
	for _, k := range keys {
		if s, ok := m.State(k); ok && !seen[k] && (s.WriteLocked || s.ReadLocks > 0) {
			seen[k] = true
			out = append(out, l1.Entry[K]{Key: k, ObjectState: s})
		}
	}
	return out
}

// FreeHeldAtOnce lets go, on their holders' behalf, of the leases that the
// locked objects in entries had before a forced delete removed them, so
// that l1 frees the blocks it held for those leases at once. An entry
// whose key still holds its lock was not deleted and is skipped.
func FreeHeldAtOnce[K comparable](m *l1.Manager[K], entries []l1.Entry[K]) {
	for _, e := range entries {
		if s, ok := m.State(e.Key); ok && (s.WriteLease == e.WriteLease && e.WriteLease != 0 || s.ReadLease == e.ReadLease && e.ReadLease != 0) {
			continue // not deleted: the lock stands
		}
		k := []K{e.Key}
		if e.WriteLocked {
			_, _ = m.AbortWrite(k, []l1.Lease{e.WriteLease})
			continue
		}
		for left := e.ReadLocks; left > 0; left -= min(left, l1.MaxReadLocks) {
			_, _ = m.FinishRead(k, []l1.Lease{e.ReadLease}, min(left, l1.MaxReadLocks))
		}
	}
}
