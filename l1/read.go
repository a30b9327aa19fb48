package l1

import (
	"fmt"
	"slices"
)

// checkLocks validates a read-lock count.
func checkLocks(locks int) error {
	if locks < 1 || locks > MaxReadLocks {
		return fmt.Errorf("%w: read locks %d outside [1, %d]", ErrInvalidArgument, locks, MaxReadLocks)
	}
	return nil
}

// ReserveRead takes locks read locks on each readable key and returns its
// block and read lease. Per key: KeyNotExist; KeyNotReadable while the
// object is write-locked; otherwise OK, the lock count raised by locks, the
// read expiry refreshed for every holder, and the object made most recently
// used. The lease is the read lock's epoch: new when the lock was not held,
// the current holders' otherwise (see Lease). locks outside [1,
// MaxReadLocks] is an error wrapping ErrInvalidArgument, and nothing
// changes. A key repeated in one call is locked once per occurrence. After
// Close it returns ErrClosed.
func (m *Manager[K]) ReserveRead(keys []K, locks int) ([]Result, error) {
	return m.AppendReserveRead(nil, keys, locks)
}

// AppendReserveRead is ReserveRead appending its Results, one per key in
// key order, to dst and returning the extended slice; it allocates no
// result slice when dst has room (the daemon's read path reuses one per
// connection). On an error it returns nil and the error, as ReserveRead
// does, and dst's contents are unchanged.
func (m *Manager[K]) AppendReserveRead(dst []Result, keys []K, locks int) ([]Result, error) {
	return m.reserveRead(dst, keys, locks, true)
}

// ReserveReadUntracked is ReserveRead for a copy an owner makes of its
// own objects (kvallocd's write-through to its L2 tier): the same locks,
// leases and statuses, but no use is recorded. Recency, the eviction
// policy's counts and the Partial hint stay as they were, no lookup is
// counted and no event is reported, so that the copy does not pass for a
// reader. FinishReadUntracked releases its locks.
func (m *Manager[K]) ReserveReadUntracked(keys []K, locks int) ([]Result, error) {
	return m.reserveRead(nil, keys, locks, false)
}

// reserveRead is AppendReserveRead; track records the uses.
func (m *Manager[K]) reserveRead(dst []Result, keys []K, locks int, track bool) ([]Result, error) {
	if err := checkLocks(locks); err != nil {
		return nil, err
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	base := len(dst)
	dst = slices.Grow(dst, len(keys))[:base+len(keys)]
	out := dst[base:]
	clear(out)
	var ok []K
	hits := 0
	m.beginHints(len(keys))
	for i := range keys {
		o := m.lookupAtLocked(i, &keys[i], now)
		switch {
		case o == nil:
			out[i].Status = KeyNotExist
		case o.write.held(now):
			out[i].Status = KeyNotReadable
		case !track:
			m.readLockLocked(o, locks, now)
			m.syncEvictLocked(o, now)
			out[i] = Result{Status: OK, Block: o.block, Lease: o.rlease}
		default:
			out[i] = Result{Status: OK, Block: o.block, Lease: m.readOneLocked(o, locks, now)}
			hits++
			if m.listening() {
				ok = append(ok, keys[i])
			}
		}
	}
	if track {
		m.countLookupsLocked(LookupRead, hits, len(keys)-hits, 0)
		m.emitLocked(EventReadReserved, ok)
	}
	return dst, nil
}

// readLockLocked adds read holds to o, starting a new epoch when the lock
// was not held, and queues a temporary object for reclaim at its read
// expiry.
func (m *Manager[K]) readLockLocked(o *object[K], locks int, now int64) {
	if !o.read.held(now) {
		o.rlease = m.nextLease()
		m.noteLease(o.rlease, o)
	}
	o.read.lock(locks, now, m.rttl)
	if o.temporary {
		m.enqueueLocked(o, tempQueue)
	} else {
		m.enqueueLocked(o, readQueue)
	}
}

// UnsafeRead returns the blocks of objects that are read-locked, without
// taking a lock: the caller must hold one, from ReserveRead or
// FinishWriteAndReserveRead, until it is done. Per key: KeyNotExist;
// KeyNotReadable unless the object is read-locked; otherwise OK. It
// does not change recency and reports no event. After Close it returns
// ErrClosed.
func (m *Manager[K]) UnsafeRead(keys []K) ([]Result, error) {
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Result, len(keys))
	hits := 0
	m.beginHints(len(keys))
	for i := range keys {
		o := m.lookupAtLocked(i, &keys[i], now)
		switch {
		case o == nil:
			out[i].Status = KeyNotExist
		case !o.read.held(now) || o.write.held(now):
			out[i].Status = KeyNotReadable
		default:
			out[i] = Result{Status: OK, Block: o.block, Lease: o.rlease}
			hits++
		}
	}
	m.countLookupsLocked(LookupUnsafeRead, hits, len(keys)-hits, 0)
	return out, nil
}

// FinishRead releases locks read locks on each key. leases[i] is the read
// lease the caller got for keys[i]. Per key: KeyNotExist; KeyInWrongState
// when the object is write-locked or not read-locked (a reader that held
// no lock may have read inconsistent data); StaleLease when the lock is of
// a later epoch than the caller's (the caller's lapsed and others locked
// since: their holds are not the caller's to release); otherwise OK, and
// the count drops by locks, not below zero. A temporary object whose count
// reaches zero is removed and its memory freed (CauseTemporaryRead). locks
// outside [1, MaxReadLocks], or len(leases) != len(keys), is an error
// wrapping ErrInvalidArgument, and nothing changes. After Close it returns
// ErrClosed.
//
// A temporary object whose read lock lapsed before FinishRead was already
// reclaimed (CauseExpired), so FinishRead answers KeyNotExist for it;
// LMCache answered KEY_IN_WRONG_STATE and leaked the object until eviction.
func (m *Manager[K]) FinishRead(keys []K, leases []Lease, locks int) ([]Status, error) {
	return m.finishRead(keys, leases, locks, true)
}

// FinishReadUntracked is FinishRead for the locks of ReserveReadUntracked:
// it releases as FinishRead does (the release, like any, makes the object
// most recently used, but counts no use for the eviction policy) and
// reports no ReadFinished event; a temporary object whose count reaches
// zero is removed, and reported, as FinishRead does.
func (m *Manager[K]) FinishReadUntracked(keys []K, leases []Lease, locks int) ([]Status, error) {
	return m.finishRead(keys, leases, locks, false)
}

// finishRead is FinishRead; track records the uses.
func (m *Manager[K]) finishRead(keys []K, leases []Lease, locks int, track bool) ([]Status, error) {
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
	out := make([]Status, len(keys))
	var ok []K
	var gone []K
	m.beginHints(len(keys))
	for i := range keys {
		if len(m.quarantine) > 0 && m.releaseHeldReadLocked(&keys[i], leases[i], locks) {
			continue // OK: a hold of a deleted key's block, freed with the last
		}
		o := m.lookupLeaseLocked(i, &keys[i], leases[i], now)
		switch {
		case o == nil:
			out[i] = KeyNotExist
		case o.write.held(now) || !o.read.held(now):
			out[i] = KeyInWrongState
		case o.rlease != leases[i]:
			out[i] = StaleLease
		default:
			o.read.unlock(locks)
			if o.read.count == 0 {
				m.dequeueLocked(o)
			}
			if o.read.count == 0 && o.temporary {
				m.dropLocked(o, CauseTemporaryRead)
				gone = append(gone, keys[i])
			} else {
				// A release counts as use (see policy.go).
				m.touchLocked(o, false)
				m.syncEvictLocked(o, now)
			}
			if track && m.listening() {
				ok = append(ok, keys[i])
			}
		}
	}
	// ReadFinished before Removed, as LMCache reports them.
	m.emitLocked(EventReadFinished, ok)
	for _, k := range gone {
		m.noteRemovedLocked(k, CauseTemporaryRead)
	}
	return out, nil
}
