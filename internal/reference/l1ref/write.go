package l1ref

import (
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
// reserved: the quarantined write of that lease lets go (WriteLapsed);
// otherwise the key must exist, be write-locked and not read-locked, and
// l must be its write lease.
func (m *Manager[K]) finish(k K, o *object, l l1.Lease) l1.Status {
	switch {
	case m.unquarantine(k, l):
		return l1.WriteLapsed
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
		switch {
		case m.unquarantine(k, leases[i]):
			return l1.OK
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

// unquarantine releases the quarantined write that lease l names, if it is
// key's, and reports whether there was one: the owner of a lapsed write
// lets go, whatever the key holds now.
func (m *Manager[K]) unquarantine(key K, l l1.Lease) bool {
	q, ok := m.quarantine[l]
	if !ok || q.Key != key {
		return false
	}
	m.Mem.Release([]allocator.Block{q.Block})
	delete(m.quarantine, l)
	return true
}
