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
// key any more.
//
// Accounting. Stats.Held is the live objects' bytes, Stats.QuarantinedBytes
// the quarantine's, and over a memory that only the manager allocates from,
// Stats.Used == Held + QuarantinedBytes. The room a one-pass reservation
// computes (room.go), and the test that starts on-demand eviction without
// a failing allocation, leave the quarantined bytes out of what the
// manager could free. EvictTo evicts by Held: the bytes eviction can reach.
//
// Cost: a map from lease to key and block, made at the first lapse and
// touched only by lapses, by Close and, while it is not empty, by the
// finishing calls (one map lookup per key). A manager whose writers finish
// in time never makes it. A writer that never lets go holds its block
// until Close, which is why the option is off by default: in one process,
// a writer whose lock lapsed is usually gone for good, and without an owner
// who learns of its end its memory would be lost.

// quarantined is one lapsed write: its key and the block its writer holds.
type quarantined[K comparable] struct {
	key   K
	block allocator.Block
}

// expireWriteLocked applies o's lapsed write lock: it reclaims o or, under
// Config.QuarantineLapsedWrites, drops its key and quarantines its block.
func (m *Manager[K]) expireWriteLocked(o *object[K]) {
	if !m.cfg.QuarantineLapsedWrites {
		m.removeLocked(o, CauseExpired)
		return
	}
	if m.quarantine == nil {
		m.quarantine = map[Lease]quarantined[K]{}
	}
	m.quarantine[o.wlease] = quarantined[K]{key: o.key, block: o.block}
	m.qbytes += o.block.Size
	m.stats.Quarantines++
	m.forgetReportLocked(o, CauseQuarantined)
}

// releaseQuarantinedLocked frees the block of the quarantined write that
// lease l names, if it is key's, and reports whether there was one.
func (m *Manager[K]) releaseQuarantinedLocked(key *K, l Lease) bool {
	q, ok := m.quarantine[l]
	if !ok || !m.objects.equal(&q.key, key) {
		return false
	}
	delete(m.quarantine, l)
	m.qbytes -= q.block.Size
	m.pending = append(m.pending, q.block)
	return true
}

// releaseAllQuarantinedLocked frees every quarantined block, for Close.
func (m *Manager[K]) releaseAllQuarantinedLocked() {
	for _, q := range m.quarantine {
		m.pending = append(m.pending, q.block)
	}
	m.quarantine, m.qbytes = nil, 0
}
