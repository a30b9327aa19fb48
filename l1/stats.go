package l1

// Counters are the manager's monotonic event counts.
type Counters struct {
	// AllocCalls counts the memory's AppendBatch, AppendUpTo and
	// AppendReissue calls (the last: on-demand eviction reusing victims'
	// blocks).
	AllocCalls uint64
	// WriteReservations counts keys ReserveWrite granted.
	WriteReservations uint64
	// PartialGrants counts ReserveWrite calls that allocated some, but not
	// all, of the keys they had to allocate.
	PartialGrants uint64
	// FailedReservations counts ReserveWrite calls that had keys to
	// allocate and allocated none.
	FailedReservations uint64
	// OOMKeys counts keys answered OutOfMemory.
	OOMKeys uint64
	// Evictions counts objects evicted, on demand or by EvictTo.
	Evictions uint64
	// OnDemandEvictions counts the evictions ReserveWrite made.
	OnDemandEvictions uint64
	// Expired counts objects reclaimed because a write lock, or a
	// temporary object's read lock, lapsed, quarantined ones included.
	Expired uint64
	// Quarantines counts lapsed writes whose blocks were quarantined
	// (Config.QuarantineLapsedWrites).
	Quarantines uint64
	// FreeErrors counts frees the memory refused. It stays 0 unless the
	// memory is closed or misbehaves under the manager.
	FreeErrors uint64
	// PeakPendingEvents is the most events ever waiting for delivery to
	// listeners at once (see Listener): a high-water mark.
	PeakPendingEvents uint64
	// Lookups are the hits and misses of the calls that look keys up, by
	// kind of call (see LookupKind).
	Lookups [NumLookupKinds]LookupCounts
}

// Stats is a snapshot of the manager.
type Stats struct {
	// Objects is the number of keys held; WriteLocked of them are being
	// written and TemporaryReadLocked are read-locked temporary objects.
	// Expired objects not yet reclaimed are still counted: Stats does not
	// sweep.
	Objects, WriteLocked, TemporaryReadLocked int
	// Held is the bytes in the objects' blocks, as Usage reports them;
	// Used and Capacity are the memory's. Used exceeds Held +
	// QuarantinedBytes only when others allocate from the same memory.
	Held, Used, Capacity int64
	// QuarantinedObjects and QuarantinedBytes are the blocks held in no
	// object, and their bytes: the lapsed writes' (see
	// Config.QuarantineLapsedWrites), waiting for their writers'
	// AbortWrite or FinishWrite, and those of keys deleted with force under
	// a live lock, waiting for its holders (see the package doc, "Forced
	// deletes"). None is in Objects.
	QuarantinedObjects int
	QuarantinedBytes   int64
	// PendingEvents is the number of events waiting for delivery to
	// listeners (see Listener).
	PendingEvents int
	Counters
}

// Stats returns the counts, read under the manager lock, and the memory's
// usage. It is O(1) and, unlike every other method, does not reclaim
// expired objects.
func (m *Manager[K]) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := m.mem.Stats()
	return Stats{
		Objects:             m.objects.n,
		WriteLocked:         m.queues[writeQueue].live,
		TemporaryReadLocked: m.queues[tempQueue].live,
		Held:                m.held,
		Used:                ms.Used,
		Capacity:            ms.Capacity,
		QuarantinedObjects:  len(m.quarantine),
		QuarantinedBytes:    m.qbytes,
		PendingEvents:       m.delivery.pending(),
		Counters:            m.stats,
	}
}

// Usage returns the bytes held by the manager's objects (their blocks'
// aligned sizes; not the quarantine's, see Stats.QuarantinedBytes) and the
// memory's capacity. It reads under the manager
// lock, so it never sees a binary-search probe's transient blocks, and like
// Stats it does not reclaim expired objects.
func (m *Manager[K]) Usage() (used, capacity int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held, m.mem.Stats().Capacity
}
