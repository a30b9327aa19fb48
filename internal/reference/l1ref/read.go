package l1ref

import "github.com/kvalloc/kvalloc/l1"

// ReserveRead models l1.Manager.ReserveRead.
func (m *Manager[K]) ReserveRead(keys []K, locks int) ([]l1.Result, error) {
	out, err := perKey(m, badLocks(locks), keys, func(_ int, _ K, o *object) l1.Result { return m.readLock(o, locks) })
	if err == nil {
		hits := oks(out)
		m.count(l1.LookupRead, len(keys), hits, len(keys)-hits)
	}
	return out, err
}

// ReserveReadUntracked models l1.Manager.ReserveReadUntracked: ReserveRead
// that records no use (no hit, no touch) and counts no lookup.
func (m *Manager[K]) ReserveReadUntracked(keys []K, locks int) ([]l1.Result, error) {
	return perKey(m, badLocks(locks), keys, func(_ int, _ K, o *object) l1.Result {
		switch {
		case o == nil:
			return l1.Result{Status: l1.KeyNotExist}
		case o.write.held(m.Now):
			return l1.Result{Status: l1.KeyNotReadable}
		}
		m.readLockOne(o, locks)
		return l1.Result{Status: l1.OK, Block: o.block, Lease: o.rlease}
	})
}

// FinishReadUntracked models l1.Manager.FinishReadUntracked: FinishRead
// (the model reports no events).
func (m *Manager[K]) FinishReadUntracked(keys []K, leases []l1.Lease, locks int) ([]l1.Status, error) {
	return m.FinishRead(keys, leases, locks)
}

// readLock read-locks o, as ReserveRead does each key: a missing key is
// KeyNotExist, a write-locked one KeyNotReadable.
func (m *Manager[K]) readLock(o *object, locks int) l1.Result {
	switch {
	case o == nil:
		return l1.Result{Status: l1.KeyNotExist}
	case o.write.held(m.Now):
		return l1.Result{Status: l1.KeyNotReadable}
	}
	m.readLockOne(o, locks)
	m.hit(o)
	m.touch(o)
	return l1.Result{Status: l1.OK, Block: o.block, Lease: o.rlease}
}

// readLockOne takes read holds, starting a new epoch when none was held.
func (m *Manager[K]) readLockOne(o *object, locks int) {
	if !o.read.held(m.Now) {
		o.rlease = m.nextLease()
	}
	o.read.take(locks, m.Now, m.Cfg.ReadTTL)
	m.seq++
	o.readSeq = m.seq
}

// ReserveReadPrefix models l1.Manager.ReserveReadPrefix: ReserveRead of
// the keys up to the first that is missing or write-locked, which gets its
// status; every later key is Skipped and left alone.
func (m *Manager[K]) ReserveReadPrefix(keys []K, locks int) ([]l1.Result, int, error) {
	if err := m.begin(badLocks(locks)); err != nil {
		return nil, 0, err
	}
	out := make([]l1.Result, len(keys))
	n := 0
	for ; n < len(keys); n++ {
		if o := m.objects[keys[n]]; o == nil || o.write.held(m.Now) {
			break
		}
	}
	for i, k := range keys {
		if i <= n { // the prefix, then the miss's status
			out[i] = m.readLock(m.objects[k], locks)
		} else {
			out[i].Status = l1.Skipped
		}
	}
	misses := min(1, len(keys)-n)
	m.count(l1.LookupReadPrefix, len(keys), n, misses)
	return out, n, nil
}

// UnsafeRead models l1.Manager.UnsafeRead: the blocks of read-locked keys.
func (m *Manager[K]) UnsafeRead(keys []K) ([]l1.Result, error) {
	out, err := perKey(m, false, keys, func(_ int, _ K, o *object) l1.Result {
		switch {
		case o == nil:
			return l1.Result{Status: l1.KeyNotExist}
		case !o.read.held(m.Now) || o.write.held(m.Now):
			return l1.Result{Status: l1.KeyNotReadable}
		}
		return l1.Result{Status: l1.OK, Block: o.block, Lease: o.rlease}
	})
	if err == nil {
		hits := oks(out)
		m.count(l1.LookupUnsafeRead, len(keys), hits, len(keys)-hits)
	}
	return out, err
}

// FinishRead models l1.Manager.FinishRead: a temporary object goes with
// its last hold; a release counts as a use.
func (m *Manager[K]) FinishRead(keys []K, leases []l1.Lease, locks int) ([]l1.Status, error) {
	return perKey(m, badLocks(locks) || len(leases) != len(keys), keys, func(i int, k K, o *object) l1.Status {
		if m.releaseHeld(k, leases[i], locks) {
			return l1.OK // a deleted key's hold: the last frees the block
		}
		switch {
		case o == nil:
			return l1.KeyNotExist
		case o.write.held(m.Now) || !o.read.held(m.Now):
			return l1.KeyInWrongState
		case o.rlease != leases[i]:
			return l1.StaleLease
		}
		o.read.release(locks)
		if o.read.n == 0 && o.temporary {
			m.remove(k)
		} else {
			m.touch(o)
		}
		return l1.OK
	})
}

// oks counts the results that are OK.
func oks(rs []l1.Result) int {
	n := 0
	for _, r := range rs {
		if r.Status == l1.OK {
			n++
		}
	}
	return n
}

// count adds one call of kind k that looked up n keys: hits hits, the
// first miss misses (at most one for a prefix lookup), the rest skipped.
func (m *Manager[K]) count(k l1.LookupKind, n, hits, misses int) {
	c := &m.Counters.Lookups[k]
	c.Calls++
	c.Hits += uint64(hits)
	c.Misses += uint64(misses)
	c.Skipped += uint64(n - hits - misses)
}
