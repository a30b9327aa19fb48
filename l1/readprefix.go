package l1

// ReserveReadPrefix read-locks the longest readable prefix of keys, the
// cached prefix of a request, in one call: it takes locks read locks on
// keys[0], keys[1], … exactly as ReserveRead does, and stops at the first
// key that is missing (KeyNotExist) or write-locked (KeyNotReadable). It
// returns one Result per key and n, the number of keys locked:
//
//   - results[:n] are OK, each with its block and read lease, as
//     ReserveRead answers them;
//   - results[n], when n < len(keys), says why the prefix ends;
//   - results[n+1:] are Skipped: the call did not look at those keys, so
//     nothing behind the first miss is locked, made more recently used,
//     counted as a use by the eviction policy, or reported to listeners.
//
// ReserveRead, given the same keys, would lock every readable key; a
// serving engine's prefix lookup must not, since blocks behind a miss are
// recomputed anyway, and locking them pins memory and skews recency. One
// ReserveReadPrefix replaces a ReserveRead per key (one lock round trip
// instead of n+1). Listeners hear one EventReadReserved with keys[:n]
// (none when n is 0). A key repeated within the prefix is locked once per
// occurrence, as ReserveRead does. locks outside [1, MaxReadLocks] is an
// error wrapping ErrInvalidArgument, and nothing changes. After Close it
// returns ErrClosed.
func (m *Manager[K]) ReserveReadPrefix(keys []K, locks int) ([]Result, int, error) {
	out := make([]Result, len(keys))
	n, err := m.readPrefix(keys, locks, out)
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// AppendReadPrefix is ReserveReadPrefix for a caller that keeps only the
// leases: it appends the read lease of each locked key to leases and
// returns the extended slice and n. It allocates nothing when leases has
// room, which makes it the hot path of a serving engine's lookup. On an
// error leases is returned as given.
func (m *Manager[K]) AppendReadPrefix(leases []Lease, keys []K, locks int) ([]Lease, int, error) {
	if err := checkLocks(locks); err != nil {
		return leases, 0, err
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return leases, 0, ErrClosed
	}
	n := 0
	m.beginHints(len(keys))
	for i := range keys {
		o := m.lookupAtLocked(i, &keys[i], now)
		if o == nil || o.write.held(now) {
			break
		}
		leases = append(leases, m.readOneLocked(o, locks, now))
		n++
	}
	m.countPrefixLocked(len(keys), n)
	if n > 0 && m.listening() {
		m.emitLocked(EventReadReserved, append([]K(nil), keys[:n]...))
	}
	return leases, n, nil
}

// readPrefix fills out (len(keys) long) for ReserveReadPrefix.
func (m *Manager[K]) readPrefix(keys []K, locks int, out []Result) (int, error) {
	if err := checkLocks(locks); err != nil {
		return 0, err
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return 0, ErrClosed
	}
	n := len(keys)
	m.beginHints(len(keys))
	for i := range keys {
		o := m.lookupAtLocked(i, &keys[i], now)
		switch {
		case o == nil:
			out[i].Status = KeyNotExist
		case o.write.held(now):
			out[i].Status = KeyNotReadable
		default:
			out[i] = Result{Status: OK, Block: o.block, Lease: m.readOneLocked(o, locks, now)}
			continue
		}
		n = i
		for j := i + 1; j < len(keys); j++ {
			out[j].Status = Skipped
		}
		break
	}
	m.countPrefixLocked(len(keys), n)
	if n > 0 && m.listening() {
		m.emitLocked(EventReadReserved, append([]K(nil), keys[:n]...))
	}
	return n, nil
}

// readOneLocked read-locks o, readable, for ReserveRead and the prefix
// calls, and returns its read lease.
func (m *Manager[K]) readOneLocked(o *object[K], locks int, now int64) Lease {
	m.readLockLocked(o, locks, now)
	m.syncEvictLocked(o, now)
	m.touchLocked(o, true)
	return o.rlease
}
