package l1

// Expiry queues.
//
// Write-locked objects, read-locked temporary objects and other read-locked
// objects each wait in a queue ordered by lock expiry, so that the sweep at
// the start of every call (sweepLocked) finds the lapsed locks from the
// front and stops at the first live one. A queue is a slice of entries, not
// a list through the objects: an entry names a record, the expiry the
// object's lock had when it entered, and the record's queue sequence number
// at that moment (meta.qseq, which counts the record's entries and survives
// the record's reuse). Entering a queue appends an entry and bumps the
// sequence; leaving one only marks the record (queue = noQueue). An entry is
// live while its record is in the index, in that queue, with that sequence
// number; every other entry is stale, skipped and dropped by whoever meets
// it. So a lock or an unlock costs a store to the object and at most an
// append, where a list cost an unlink and a link, touching the neighbours'
// records.
//
// Entries are appended in expiry order: each queue's locks share one TTL
// and the manager's time never goes backwards (see tick), so a later entry
// never expires sooner (push keeps the order all the same). Stale entries at
// the front are dropped by the sweep, and all of them when the queue's last
// object leaves it; a queue whose entries outnumber twice
// its objects, plus compactSlack, when an entry goes in is compacted in
// place, keeping its live entries in order. Each entry is appended once
// and dropped once, so both are amortized O(1), and a queue holds at most
// twice the most objects it held since its last entry, plus compactSlack
// (TestExpiryQueueBounded). A record's sequence number is not reset when
// the record is reused, so an old entry never passes for a new object's
// (TestExpiryEntryOfReusedRecord).

// expEntry is one entry of an expiry queue.
type expEntry struct {
	expiry int64
	rec    int32  // the record's number
	seq    uint32 // the record's qseq when it entered
}

// expQueue is one expiry queue: ents[head:], in expiry order.
type expQueue struct {
	ents []expEntry
	head int
	live int // objects in the queue
}

// compactSlack is how many stale entries a queue always tolerates.
const compactSlack = 32

// push appends e, keeping the entries in expiry order.
func (q *expQueue) push(e expEntry) {
	i := len(q.ents)
	q.ents = append(q.ents, e)
	for ; i > q.head && q.ents[i-1].expiry > e.expiry; i-- { // never, see above
		q.ents[i] = q.ents[i-1]
	}
	q.ents[i] = e
}

// pop drops the front entry.
func (q *expQueue) pop() {
	q.head++
	switch n := len(q.ents) - q.head; {
	case n == 0:
		q.ents, q.head = q.ents[:0], 0
	case q.head >= n && q.head >= 1024: // reclaim the dropped prefix
		copy(q.ents, q.ents[q.head:])
		q.ents, q.head = q.ents[:n], 0
	}
}

// reset empties the queue, for Close.
func (q *expQueue) reset() { *q = expQueue{} }

// entryLocked returns the object e names if e is live in queue id, else nil.
func (m *Manager[K]) entryLocked(e expEntry, id queueID) *object[K] {
	if o := m.objects.rec(e.rec); o.live && o.queue == id && o.qseq == e.seq {
		return o
	}
	return nil
}

// frontLocked returns the first object of queue id, dropping the stale
// entries before it; nil when the queue is empty.
func (m *Manager[K]) frontLocked(id queueID) *object[K] {
	q := &m.queues[id]
	for q.head < len(q.ents) {
		if o := m.entryLocked(q.ents[q.head], id); o != nil {
			return o
		}
		q.pop()
	}
	return nil
}

// enqueueLocked puts o in expiry queue id at the expiry of its lock (the
// write lock for writeQueue, else the read lock), taking it out of any
// queue it was in; an object already in id moves to its new place.
func (m *Manager[K]) enqueueLocked(o *object[K], id queueID) {
	m.dequeueLocked(o)
	expiry := o.read.expiry
	if id == writeQueue {
		expiry = o.write.expiry
	}
	o.qseq++
	o.queue = id
	q := &m.queues[id]
	q.live++
	q.push(expEntry{expiry: expiry, rec: o.idx, seq: o.qseq})
	if len(q.ents)-q.head > 2*q.live+compactSlack {
		m.compactLocked(id)
	}
}

// dequeueLocked takes o out of its expiry queue, if any: its entry goes
// stale. A queue left with no object drops its entries at once, without
// visiting their records.
func (m *Manager[K]) dequeueLocked(o *object[K]) {
	if o.queue != noQueue {
		q := &m.queues[o.queue]
		if q.live--; q.live == 0 {
			q.ents, q.head = q.ents[:0], 0
		}
		o.queue = noQueue
	}
}

// compactLocked drops the stale entries of queue id, keeping the order.
func (m *Manager[K]) compactLocked(id queueID) {
	q := &m.queues[id]
	kept := q.ents[:0]
	for _, e := range q.ents[q.head:] {
		if m.entryLocked(e, id) != nil {
			kept = append(kept, e)
		}
	}
	q.ents, q.head = kept, 0
}
