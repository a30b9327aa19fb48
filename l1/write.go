package l1

import "fmt"

// checkLeases validates the leases of a finishing call: one per key.
func checkLeases(keys int, leases []Lease) error {
	if len(leases) != keys {
		return fmt.Errorf("%w: %d leases for %d keys", ErrInvalidArgument, len(leases), keys)
	}
	return nil
}

// FinishWrite commits the keys' writes: the write lock is released and the
// object becomes readable and most recently used. leases[i] is the write
// lease ReserveWrite returned for keys[i]. Per key: KeyNotExist;
// KeyInWrongState when the object is not write-locked (or is read-locked);
// StaleLease when the write lock is someone else's; otherwise OK. A key
// whose write lock lapsed was reclaimed, so it answers KeyNotExist, or
// StaleLease once another writer reserved it again: either way its data
// never becomes readable, and the other writer's reservation stands. Under
// Config.QuarantineLapsedWrites it answers WriteLapsed instead, whatever
// the key holds now, and the block the lapsed write held is freed (see
// quarantine.go).
//
// len(leases) != len(keys) is an error wrapping ErrInvalidArgument, and
// nothing changes. After Close it returns ErrClosed.
func (m *Manager[K]) FinishWrite(keys []K, leases []Lease) ([]Status, error) {
	if err := checkLeases(len(keys), leases); err != nil {
		return nil, err
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Status, len(keys))
	var ok []K
	m.beginHints(len(keys))
	for i := range keys {
		if len(m.quarantine) > 0 {
			if found, deleted := m.releaseQuarantinedLocked(&keys[i], leases[i]); found {
				out[i] = heldWriteStatus(deleted)
				continue
			}
		}
		o := m.lookupLeaseLocked(i, &keys[i], leases[i], now)
		switch {
		case o == nil:
			out[i] = KeyNotExist
		case !o.write.held(now) || o.read.held(now):
			out[i] = KeyInWrongState
		case o.wlease != leases[i]:
			out[i] = StaleLease
		default:
			m.finishWriteLocked(o)
			m.syncEvictLocked(o, now)
			if m.listening() {
				ok = append(ok, keys[i])
			}
		}
	}
	m.emitLocked(EventWriteFinished, ok)
	return out, nil
}

// heldWriteStatus is what finishing a held write answers: WriteDeleted
// when its key was deleted with force, WriteLapsed when its lock lapsed.
func heldWriteStatus(deleted bool) Status {
	if deleted {
		return WriteDeleted
	}
	return WriteLapsed
}

func (m *Manager[K]) finishWriteLocked(o *object[K]) {
	o.write = ttlLock{}
	o.finished = true
	m.dequeueLocked(o)
	m.touchLocked(o, false)
}

// FinishWriteAndReserveRead commits the keys' writes and takes locks read
// locks on them in one step, so that nothing can evict or rewrite an object
// between the two; prefetch uses it. leases[i] is keys[i]'s write lease.
// Per key: KeyNotExist; KeyInWrongState when the object is not
// write-locked or is already read-locked; StaleLease when the write lock
// is someone else's; otherwise OK with the block and the new read lease.
// A lapsed write answers as for FinishWrite (WriteLapsed under
// Config.QuarantineLapsedWrites, which frees its block), and takes no read
// lock. locks outside [1, MaxReadLocks], or len(leases) != len(keys), is
// an error wrapping ErrInvalidArgument, and nothing changes. After Close
// it returns ErrClosed.
func (m *Manager[K]) FinishWriteAndReserveRead(keys []K, leases []Lease, locks int) ([]Result, error) {
	if err := checkLocks(locks); err != nil {
		return nil, err
	}
	if err := checkLeases(len(keys), leases); err != nil {
		return nil, err
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Result, len(keys))
	var ok []K
	m.beginHints(len(keys))
	for i := range keys {
		if len(m.quarantine) > 0 {
			if found, deleted := m.releaseQuarantinedLocked(&keys[i], leases[i]); found {
				out[i].Status = heldWriteStatus(deleted)
				continue
			}
		}
		o := m.lookupLeaseLocked(i, &keys[i], leases[i], now)
		switch {
		case o == nil:
			out[i].Status = KeyNotExist
		case !o.write.held(now) || o.read.held(now):
			out[i].Status = KeyInWrongState
		case o.wlease != leases[i]:
			out[i].Status = StaleLease
		default:
			m.finishWriteLocked(o)
			m.readLockLocked(o, locks, now)
			m.syncEvictLocked(o, now)
			out[i] = Result{Status: OK, Block: o.block, Lease: o.rlease}
			if m.listening() {
				ok = append(ok, keys[i])
			}
		}
	}
	m.emitLocked(EventWriteFinishedReadReserved, ok)
	return out, nil
}

// AbortWrite discards write reservations: each write-locked object is
// removed and its memory freed (CauseAborted), whether it was newly
// allocated or a rewrite of a finished object, since its buffer may hold a
// partial write. leases[i] is keys[i]'s write lease. Per key: KeyNotExist;
// KeyInWrongState when the object is not write-locked, and a finished
// object is then left as it is; StaleLease when the write lock is someone
// else's, whose reservation stands; otherwise OK. Under
// Config.QuarantineLapsedWrites, a lapsed write's lease frees the block
// the write held, quarantined since the lapse, and answers OK, whatever
// the key holds now: the call a node pool's owner makes, with every lease
// of a connection's writes, when the connection ends. len(leases) !=
// len(keys) is an error wrapping ErrInvalidArgument, and nothing changes.
// After Close it returns ErrClosed.
func (m *Manager[K]) AbortWrite(keys []K, leases []Lease) ([]Status, error) {
	if err := checkLeases(len(keys), leases); err != nil {
		return nil, err
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Status, len(keys))
	m.beginHints(len(keys))
	for i := range keys {
		if len(m.quarantine) > 0 {
			if found, _ := m.releaseQuarantinedLocked(&keys[i], leases[i]); found {
				continue // OK: the quarantined block is freed
			}
		}
		o := m.lookupLeaseLocked(i, &keys[i], leases[i], now)
		switch {
		case o == nil:
			out[i] = KeyNotExist
		case !o.write.held(now):
			out[i] = KeyInWrongState
		case o.wlease != leases[i]:
			out[i] = StaleLease
		default:
			m.removeLocked(o, CauseAborted)
		}
	}
	return out, nil
}
