package l1ref

import (
	"math"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// FinishWrite models l1.Manager.FinishWrite.
func (m *Manager[K]) FinishWrite(keys []K, leases []l1.Lease) ([]l1.Status, error) {
	return perKey(m, len(leases) != len(keys), keys, func(i int, k K, o *object) l1.Status {
		return m.finish(k, o, leases[i])
	})
}

// FinishWriteAndReserveRead models l1.Manager.FinishWriteAndReserveRead:
// FinishWrite, then a read lock on each key it finished.
func (m *Manager[K]) FinishWriteAndReserveRead(keys []K, leases []l1.Lease, locks int) ([]l1.Result, error) {
	return perKey(m, badLocks(locks) || len(leases) != len(keys), keys, func(i int, k K, o *object) l1.Result {
		if st := m.finish(k, o, leases[i]); st != l1.OK {
			return l1.Result{Status: st}
		}
		m.readLockOne(o, locks)
		return l1.Result{Status: l1.OK, Block: o.block, Lease: o.rlease}
	})
}

// finish commits the write of key k (object o, nil for none) that lease l
// reserved: the held write of that lease lets go (WriteLapsed after a
// lapse, WriteDeleted after a forced delete); otherwise the key must
// exist, be write-locked and not read-locked, and l must be its write
// lease.
func (m *Manager[K]) finish(k K, o *object, l l1.Lease) l1.Status {
	if found, deleted := m.unquarantine(k, l); found {
		if deleted {
			return l1.WriteDeleted
		}
		return l1.WriteLapsed
	}
	switch {
	case o == nil:
		return l1.KeyNotExist
	case !o.write.held(m.Now) || o.read.held(m.Now):
		return l1.KeyInWrongState
	case o.wlease != l:
		return l1.StaleLease
	}
	o.write, o.finished = lock{}, true
	m.touch(o)
	return l1.OK
}

// AbortWrite models l1.Manager.AbortWrite.
func (m *Manager[K]) AbortWrite(keys []K, leases []l1.Lease) ([]l1.Status, error) {
	return perKey(m, len(leases) != len(keys), keys, func(i int, k K, o *object) l1.Status {
		if found, _ := m.unquarantine(k, leases[i]); found {
			return l1.OK
		}
		switch {
		case o == nil:
			return l1.KeyNotExist
		case !o.write.held(m.Now):
			return l1.KeyInWrongState
		case o.wlease != leases[i]:
			return l1.StaleLease
		}
		m.remove(k)
		return l1.OK
	})
}

// unquarantine releases the held write that lease l names, if it is key's,
// and reports whether there was one and whether its key was deleted: the
// owner of a lapsed or deleted write lets go, whatever the key holds now.
func (m *Manager[K]) unquarantine(key K, l l1.Lease) (found, deleted bool) {
	q, ok := m.quarantine[l]
	if !ok || q.Read || q.Key != key {
		return false, false
	}
	m.Mem.Release([]allocator.Block{q.Block})
	delete(m.quarantine, l)
	return true, q.Deleted
}

// releaseHeld releases locks holds of the deleted key's read lease l, if
// it is key's, freeing the block with the last, and reports whether there
// was one.
func (m *Manager[K]) releaseHeld(key K, l l1.Lease, locks int) bool {
	q, ok := m.quarantine[l]
	if !ok || !q.Read || q.Key != key {
		return false
	}
	if q.Count -= int64(locks); q.Count > 0 {
		m.quarantine[l] = q
		return true
	}
	m.Mem.Release([]allocator.Block{q.Block})
	delete(m.quarantine, l)
	return true
}

// forceRemove drops key k (object o) for a forced Delete or Clear: the
// block of an object under a live lock stays taken, held under the lock's
// lease until its holders let go or the lock lapses (a write under
// QuarantineLapsedWrites: until its owner lets go); any other is freed.
func (m *Manager[K]) forceRemove(k K, o *object) {
	switch {
	case o.write.held(m.Now):
		exp := o.write.expiry
		if m.Cfg.QuarantineLapsedWrites {
			exp = math.MaxInt64
		}
		m.quarantine[o.wlease] = Quarantined[K]{Key: k, Block: o.block, Deleted: true, Expiry: exp}
	case o.read.held(m.Now):
		m.quarantine[o.rlease] = Quarantined[K]{Key: k, Block: o.block, Deleted: true, Read: true, Count: o.read.n, Expiry: o.read.expiry}
	default:
		m.remove(k)
		return
	}
	delete(m.objects, k)
}
