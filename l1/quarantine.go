package l1

import "github.com/kvalloc/kvalloc/allocator"

// Quarantine of lapsed writes (Config.QuarantineLapsedWrites).
//
// A write lock lapses when its writer stalls past the write TTL. The
// default, reclaiming the object and freeing its block, is safe only when a
// writer whose lock lapsed has stopped writing. The writers of a node pool
// are other processes: one that is alive but slow (a load from a slower
// tier, a stalled copy) may still be filling the buffer after its lock
// lapsed, and a freed block goes to the next writer and, once that writer
// finishes, to readers: two writers in one buffer, and readers of a mix.
// The owner of a node pool learns of a writer's death when its connection
// ends, so it needs no TTL to reclaim a dead writer's memory, only to keep
// a stuck writer from holding its key forever.
//
// So, with the option, a lapse splits the object in two:
//   - the key is dropped as a reclaim drops it: unreadable (KeyNotExist),
//     reported as EventRemoved with CauseQuarantined, counted in
//     Stats.Expired, and free for anyone to reserve again, under a new
//     record and a new block (the quarantined block is still allocated, so
//     the memory cannot hand it out);
//   - the block stays allocated, held in the quarantine under the write's
//     lease, out of the index, of every expiry queue and of the eviction
//     policy, so that no call but its owner's can reach it.
//
// The owner lets go by presenting its lease with the key:
//   - AbortWrite frees the block and answers OK, as for a live write;
//   - FinishWrite and FinishWriteAndReserveRead drop the write, free the
//     block and answer WriteLapsed. The write is not admitted: the key was
//     missing from the lapse on and another writer may have reserved or
//     finished it since, so admitting would overwrite a newer value or
//     publish a buffer the manager had stopped vouching for. Without the
//     option a lapsed write never becomes readable either; a writer told
//     WriteLapsed knows its bytes did not land and may reserve the key
//     again.
//
// The finishing calls look the lease up in the quarantine before they look
// the key up, so a lapsed writer frees its own block whatever the key holds
// now, and another writer's reservation of the key stands. A lease
// presented with another key is not the owner's and finds nothing there.
// Close frees every quarantined block. Delete and Clear, even with force,
// leave them alone: they name keys, and a quarantined block belongs to no
// key any more. A lapsed write is held forever (its expiry is endOfTime).
//
// Accounting. Stats.Held is the live objects' bytes, Stats.QuarantinedBytes
// the quarantine's, and over a memory that only the manager allocates from,
// Stats.Used == Held + QuarantinedBytes. The room a one-pass reservation
// computes (room.go), and the test that starts on-demand eviction without
// a failing allocation, leave the quarantined bytes out of what the
// manager could free. EvictTo evicts by Held: the bytes eviction can reach.
//
// Held blocks of deleted keys. Delete and Clear with force drop a key
// whatever its locks, but a live lock's holder may still be writing or
// reading its block: freed at once, the block would go to the next writer
// while the holder still used it. So the rule, the same for the daemon's
// connections: no block is freed, reissued or evicted while a lease on it
// is live. A forced delete of a locked object drops the key at once, as a
// delete does (KeyNotExist; EventRemoved, CauseDeleted; anyone may reserve
// the key again, under a new block), and holds its block in the
// quarantine under the lock's lease, counted in QuarantinedObjects and
// QuarantinedBytes, until the lease ends:
//   - a write lease ends with its holder's AbortWrite (OK, the block is
//     freed) or FinishWrite and FinishWriteAndReserveRead (WriteDeleted:
//     the write is dropped, never readable, and the block freed), or with
//     the lock's lapse, which frees the block; under
//     Config.QuarantineLapsedWrites a lapse frees nothing, as for any
//     lapsed write, and the block waits for its owner;
//   - a read lease (the epoch its readers share) ends when its holders'
//     FinishRead calls have released every hold it had (each answers OK:
//     the holder read a block that nobody reissued; the last frees it), or
//     with the read lock's lapse, which frees the block.
// The holds lapse at the expiry the lock had when its key was deleted:
// the entry keeps it, and every call's sweep frees the lapsed entries (a
// check of the earliest expiry, qnext, when none has lapsed).
//
// Cost: a map from lease to key and block, made at the first lapse or
// forced delete of a locked object and touched only by them, by Close
// and, while it is not empty, by the finishing calls (one map lookup per
// key). A manager whose writers finish in time and whose keys are not
// deleted under their holders never makes it. A writer that never lets go
// of a lapsed write holds its block until Close, which is why the option
// is off by default: in one process, a writer whose lock lapsed is usually
// gone for good, and without an owner who learns of its end its memory
// would be lost.

// quarantined is one held block: its key, the block, and the lease's
// holds.
type quarantined[K comparable] struct {
	key   K
	block allocator.Block
	// deleted: the key was deleted with force under a live lock; false
	// for a lapsed write.
	deleted bool
	// read: a read lease, whose count holds are left; false for a write.
	read  bool
	count int64
	// expiry is when the lease lapses and the block is freed, in manager
	// time; endOfTime for a lapsed write (it waits for its owner).
	expiry int64
}

// expireWriteLocked applies o's lapsed write lock: it reclaims o or, under
// Config.QuarantineLapsedWrites, drops its key and quarantines its block.
func (m *Manager[K]) expireWriteLocked(o *object[K]) {
	if !m.cfg.QuarantineLapsedWrites {
		m.removeLocked(o, CauseExpired)
		return
	}
	m.holdLocked(o.wlease, quarantined[K]{key: o.key, block: o.block, expiry: endOfTime})
	m.stats.Quarantines++
	m.forgetReportLocked(o, CauseQuarantined)
}

// holdLocked puts q in the quarantine under lease l.
func (m *Manager[K]) holdLocked(l Lease, q quarantined[K]) {
	if m.quarantine == nil {
		m.quarantine = map[Lease]quarantined[K]{}
	}
	m.quarantine[l] = q
	m.qbytes += q.block.Size
	if q.expiry < m.qnext {
		m.qnext = q.expiry
	}
}

// deleteLocked drops o for Delete or Clear: an object under a live lock
// keeps its block in the quarantine until the lock's lease ends (see
// above); any other is removed.
func (m *Manager[K]) deleteLocked(o *object[K], cause Cause, now int64) {
	switch {
	case o.write.held(now):
		expiry := o.write.expiry
		if m.cfg.QuarantineLapsedWrites {
			expiry = endOfTime
		}
		m.holdLocked(o.wlease, quarantined[K]{key: o.key, block: o.block, deleted: true, expiry: expiry})
	case o.read.held(now):
		m.holdLocked(o.rlease, quarantined[K]{key: o.key, block: o.block, deleted: true, read: true, count: o.read.count, expiry: o.read.expiry})
	default:
		m.removeLocked(o, cause)
		return
	}
	m.forgetReportLocked(o, cause)
}

// releaseQuarantinedLocked frees the block of the held write that lease l
// names, if it is key's, and reports whether there was one and whether
// its key was deleted (rather than its lock lapsed).
func (m *Manager[K]) releaseQuarantinedLocked(key *K, l Lease) (found, deleted bool) {
	q, ok := m.quarantine[l]
	if !ok || q.read || !m.objects.equal(&q.key, key) {
		return false, false
	}
	m.unholdLocked(l, q)
	return true, q.deleted
}

// releaseHeldReadLocked releases locks holds of the held read lease l, if
// it is key's, freeing the block with the last, and reports whether there
// was one.
func (m *Manager[K]) releaseHeldReadLocked(key *K, l Lease, locks int) bool {
	q, ok := m.quarantine[l]
	if !ok || !q.read || !m.objects.equal(&q.key, key) {
		return false
	}
	if q.count -= int64(locks); q.count > 0 {
		m.quarantine[l] = q
		return true
	}
	m.unholdLocked(l, q)
	return true
}

// unholdLocked frees q, held under lease l.
func (m *Manager[K]) unholdLocked(l Lease, q quarantined[K]) {
	delete(m.quarantine, l)
	m.qbytes -= q.block.Size
	m.pending = append(m.pending, q.block)
}

// sweepQuarantineLocked frees the held blocks whose leases have lapsed by
// now, and moves qnext to the earliest expiry left.
func (m *Manager[K]) sweepQuarantineLocked(now int64) {
	next := int64(endOfTime)
	for l, q := range m.quarantine {
		if q.expiry <= now {
			m.unholdLocked(l, q)
			continue
		}
		next = min(next, q.expiry)
	}
	m.qnext = next
}

// releaseAllQuarantinedLocked frees every quarantined block, for Close.
func (m *Manager[K]) releaseAllQuarantinedLocked() {
	for _, q := range m.quarantine {
		m.pending = append(m.pending, q.block)
	}
	m.quarantine, m.qbytes, m.qnext = nil, 0, endOfTime
}
