package l1

// FinishWrite commits the keys' writes: the write lock is released and the
// object becomes readable and most recently used. Per key: KeyNotExist;
// KeyInWrongState when the object is not write-locked (or is read-locked);
// otherwise OK. A key whose write lock lapsed was reclaimed, so it
// answers KeyNotExist: its data never becomes readable.
func (m *Manager[K]) FinishWrite(keys []K) []Status {
	out := make([]Status, len(keys))
	now := m.lock()
	defer m.unlock()
	var ok []K
	for i, k := range keys {
		o := m.lookupLocked(k, now)
		switch {
		case o == nil:
			out[i] = KeyNotExist
		case !o.write.held(now) || o.read.held(now):
			out[i] = KeyInWrongState
		default:
			m.finishWriteLocked(o)
			m.syncEvictLocked(o, now)
			if m.listening() {
				ok = append(ok, k)
			}
		}
	}
	m.emitLocked(EventWriteFinished, ok)
	return out
}

func (m *Manager[K]) finishWriteLocked(o *object[K]) {
	o.write = ttlLock{}
	o.finished = true
	m.dequeueLocked(o)
	m.touchLocked(o, false)
}

// FinishWriteAndReserveRead commits the keys' writes and takes locks read
// locks on them in one step, so that nothing can evict or rewrite an object
// between the two; prefetch uses it. Per key: KeyNotExist; KeyInWrongState
// when the object is not write-locked or is already read-locked; otherwise
// OK with the block. locks outside [1, MaxReadLocks] is an error
// wrapping ErrInvalidArgument, and nothing changes.
func (m *Manager[K]) FinishWriteAndReserveRead(keys []K, locks int) ([]Result, error) {
	if err := checkLocks(locks); err != nil {
		return nil, err
	}
	out := make([]Result, len(keys))
	now := m.lock()
	defer m.unlock()
	var ok []K
	for i, k := range keys {
		o := m.lookupLocked(k, now)
		switch {
		case o == nil:
			out[i].Status = KeyNotExist
		case !o.write.held(now) || o.read.held(now):
			out[i].Status = KeyInWrongState
		default:
			m.finishWriteLocked(o)
			m.readLockLocked(o, locks, now)
			m.syncEvictLocked(o, now)
			out[i] = Result{Status: OK, Block: o.block}
			if m.listening() {
				ok = append(ok, k)
			}
		}
	}
	m.emitLocked(EventWriteFinishedReadReserved, ok)
	return out, nil
}

// AbortWrite discards write reservations: each write-locked object is
// removed and its memory freed (CauseAborted), whether it was newly
// allocated or a rewrite of a finished object, since its buffer may hold a
// partial write. Per key: KeyNotExist; KeyInWrongState when the object is
// not write-locked, and a finished object is then left as it is; otherwise
// OK.
func (m *Manager[K]) AbortWrite(keys []K) []Status {
	out := make([]Status, len(keys))
	now := m.lock()
	defer m.unlock()
	for i, k := range keys {
		o := m.lookupLocked(k, now)
		switch {
		case o == nil:
			out[i] = KeyNotExist
		case !o.write.held(now):
			out[i] = KeyInWrongState
		default:
			m.removeLocked(o, CauseAborted)
		}
	}
	return out
}
