package l1

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
)

// The manager's invariants.
//
// verifyLocked checks the manager's state against itself, reading nothing
// but the manager (it never calls the Memory, whose answers are the
// memory's business). Under the invariants build tag every call that takes
// the manager lock runs it as it lets go of the lock (see invariants.go);
// it walks every record, index slot, queue entry and list, O(n log n) per
// call. The invariants, in the order they are checked:
//
//   - after Close: no record, object, block, queue entry, lease or
//     quarantined write is left;
//   - the call left no block waiting to be freed and no victim set aside;
//   - records: record i has number i, and is either live (in the index)
//     or released (zeroed but for its number and queue sequence) and in
//     the set of reusable records, whose bitmap, summary and cached word
//     agree; the held bytes are the sum of the live records' blocks;
//   - each live object: its block holds its size; it is finished or
//     write-locked; a write lock has one hold and a read lock a positive
//     count, never both at once; no lock has lapsed at the call's time,
//     and a lock without holds has no expiry; its use and stamp are not
//     ahead of the manager's counters; it is in the expiry queue its locks
//     name (write, temporary read, read, or none); it is in the eviction
//     policy's set exactly when it is evictable;
//   - leases: every held lease (a write lock's, a read lock's epoch, a
//     quarantined write's) lies in (0, the last lease handed out] and is
//     held once; the lease table names the record of each held lease
//     handed out within the table's span;
//   - the index: a power of two of slots, at most half full; each used
//     slot names a live record, once, with the record's hash, which is its
//     key's; each key is found from its hash (the probe run is unbroken,
//     and no two records hold equal keys); it counts the live records;
//   - the lookup hints name record numbers that exist;
//   - the quarantine: its bytes are its blocks' sum; a lapsed write never
//     lapses again; a deleted key's held read lease has holds left and a
//     write none; no held lease has lapsed at the call's time, or lapses
//     before the sweep's next check;
//   - blocks: no two objects' or quarantined writes' blocks overlap;
//   - expiry queues: entries in expiry order, each live entry naming a
//     record in that queue with the record's sequence number and its
//     lock's expiry, one per record, as many as the queue counts;
//   - the eviction set: its lists are well linked (heads, tails, lengths,
//     both directions), hold only objects in the set (the main list, and
//     S3-FIFO's small one, whose bytes it counts), as many as the set
//     counts; an object out of the set has no links; the prefix policy's
//     objects after the anchor are the current operation's ranked
//     entries; S3-FIFO's use counts are at most maxFreq and its ghost
//     queue counts its hashes.

// verifyLocked returns the first invariant the manager's state breaks, or
// nil. It runs under the manager lock, at the end of a call.
func (m *Manager[K]) verifyLocked() error {
	if m.closed {
		return m.verifyClosedLocked()
	}
	switch {
	case len(m.pending) != 0:
		return fmt.Errorf("%d blocks of removed objects not freed", len(m.pending))
	case len(m.ev.aside) != 0:
		return fmt.Errorf("%d victims still set aside", len(m.ev.aside))
	case m.delivery.head > len(m.delivery.queue) || m.delivery.opStart > len(m.delivery.queue):
		return fmt.Errorf("event queue head %d, operation start %d, length %d", m.delivery.head, m.delivery.opStart, len(m.delivery.queue))
	}
	v := verifier{marks: make([]uint8, m.objects.records())}
	if err := m.verifyRecordsLocked(&v); err != nil {
		return err
	}
	if err := m.verifyIndexLocked(&v); err != nil {
		return err
	}
	if err := m.verifyLeasesLocked(&v); err != nil {
		return err
	}
	if err := verifyBlocks(v.blocks); err != nil {
		return err
	}
	for id := writeQueue; id <= readQueue; id++ {
		if err := m.verifyQueueLocked(id, &v); err != nil {
			return err
		}
	}
	return m.verifyEvictSetLocked(&v)
}

// verifier is what one verifyLocked gathers in its walk of the records
// for the checks after it.
type verifier struct {
	live    int                // live records
	held    int64              // their blocks' bytes
	inQueue [readQueue + 1]int // live records by expiry queue
	members int                // live records in the eviction set
	leases  []Lease            // the held leases
	blocks  []allocator.Block  // the objects' blocks
	marks   []uint8            // by record: markIndexed, and a bit per expiry queue
}

// markIndexed marks a record found in the index; 1<<queueID one with a
// live entry in that expiry queue.
const markIndexed = 1

// verifyClosedLocked checks that Close left nothing behind.
func (m *Manager[K]) verifyClosedLocked() error {
	n := 0
	for i := range m.queues {
		n += len(m.queues[i].ents) + m.queues[i].live
	}
	switch {
	case m.objects.n != 0 || len(m.objects.chunks) != 0 || len(m.objects.slots) != 0:
		return fmt.Errorf("closed with %d objects, %d record chunks, %d index slots", m.objects.n, len(m.objects.chunks), len(m.objects.slots))
	case m.held != 0:
		return fmt.Errorf("closed holding %d bytes", m.held)
	case m.qbytes != 0 || len(m.quarantine) != 0:
		return fmt.Errorf("closed with %d quarantined writes of %d bytes", len(m.quarantine), m.qbytes)
	case n != 0:
		return fmt.Errorf("closed with %d expiry queue entries", n)
	case m.ev.n != 0 || m.ev.main.len != 0 || m.ev.small.len != 0:
		return fmt.Errorf("closed with %d objects in the eviction set", m.ev.n)
	case len(m.pending) != 0 || m.leaseRecs != nil:
		return fmt.Errorf("closed with %d blocks to free and a lease table of %d", len(m.pending), len(m.leaseRecs))
	}
	return nil
}

// records returns the number of records the store has made, record 0
// (never used) included.
func (s *store[K]) records() int32 { return int32(len(s.chunks)) << recordShift }

// verifyRecordsLocked checks every record, each live object and the held
// bytes, gathering what the later checks need into v.
func (m *Manager[K]) verifyRecordsLocked(v *verifier) error {
	s := &m.objects
	if err := s.free.verify(s.records()); err != nil {
		return fmt.Errorf("reusable records: %w", err)
	}
	v.blocks = make([]allocator.Block, 0, s.n+len(m.quarantine))
	for c, chunk := range s.chunks {
		for j := range chunk {
			if i := int32(c)<<recordShift | int32(j); i != 0 {
				if err := m.verifyRecordLocked(i, &chunk[j], v); err != nil {
					return err
				}
			}
		}
	}
	if v.held != m.held {
		return fmt.Errorf("held bytes %d, the objects' blocks hold %d", m.held, v.held)
	}
	return nil
}

// verifyRecordLocked checks record i, o, and adds a live object to v.
func (m *Manager[K]) verifyRecordLocked(i int32, o *object[K], v *verifier) error {
	var zero K
	free := m.objects.free.has(i)
	switch {
	case o.idx != i:
		return fmt.Errorf("record %d has number %d", i, o.idx)
	case !o.live && !free:
		return fmt.Errorf("record %d is neither in the index nor reusable", i)
	case !o.live && (o.key != zero || o.meta != meta{idx: o.idx, qseq: o.qseq}):
		return fmt.Errorf("record %d is reusable but not cleared: key %v, %+v", i, o.key, o.meta)
	case !o.live:
		return nil
	case free:
		return fmt.Errorf("record %d (key %v) is live and reusable", i, o.key)
	}
	v.live++
	v.held += o.block.Size
	v.blocks = append(v.blocks, o.block)
	v.inQueue[o.queue]++
	if o.evq != evNone {
		v.members++
	}
	if err := m.verifyObjectLocked(o, v); err != nil {
		return fmt.Errorf("record %d (key %v): %w", i, o.key, err)
	}
	return nil
}

// verifyObjectLocked checks one live object's fields against each other,
// the manager's counters, its expiry queue, the eviction set (and the
// policy's fields) and the lease table, and adds its held leases to v.
func (m *Manager[K]) verifyObjectLocked(o *object[K], v *verifier) error {
	now := m.now
	w, r := &o.write, &o.read
	switch {
	case o.size <= 0 || o.block.Size < o.size:
		return fmt.Errorf("block %+v for size %d", o.block, o.size)
	case !o.finished && w.count == 0:
		return fmt.Errorf("neither finished nor write-locked")
	case w.count < 0 || w.count > 1 || r.count < 0:
		return fmt.Errorf("write holds %d, read holds %d", w.count, r.count)
	case w.count > 0 && r.count > 0:
		return fmt.Errorf("write-locked and read-locked at once")
	case w.lapsed(now) || r.lapsed(now):
		return fmt.Errorf("a lapsed lock (write %+v, read %+v) at time %d", *w, *r, now)
	case w.count == 0 && w.expiry != 0 || r.count == 0 && r.expiry != 0:
		return fmt.Errorf("an expiry without holds (write %+v, read %+v)", *w, *r)
	case o.used > m.clock || o.stamp > m.stamp:
		return fmt.Errorf("used %d, stamp %d, ahead of the manager's %d, %d", o.used, o.stamp, m.clock, m.stamp)
	}
	want := noQueue
	switch {
	case w.count > 0:
		want = writeQueue
	case r.count > 0 && o.temporary:
		want = tempQueue
	case r.count > 0:
		want = readQueue
	}
	if o.queue != want {
		return fmt.Errorf("in expiry queue %d, its locks say %d", o.queue, want)
	}
	p := m.ev.policy
	switch e := evictableLocked(o, now); {
	case e != (o.evq != evNone):
		return fmt.Errorf("evictable %v, in the eviction set %v (list %d)", e, o.evq != evNone, o.evq)
	case o.evq == evAside:
		return fmt.Errorf("still set aside")
	case o.evq == evNone && o.evl != links{}:
		return fmt.Errorf("out of the eviction set but linked %+v", o.evl)
	case o.freq > maxFreq:
		return fmt.Errorf("use count %d", o.freq)
	case p == EvictS3FIFO && o.evq != evNone && o.evq != o.home:
		return fmt.Errorf("in list %d, its S3-FIFO queue is %d", o.evq, o.home)
	case p != EvictS3FIFO && (o.home != evNone || o.evq == evSmall):
		return fmt.Errorf("in list %d with home %d under %v", o.evq, o.home, p)
	case p != EvictPrefix && o.rank != 0:
		return fmt.Errorf("a prefix rank %d under %v", o.rank, p)
	}
	for _, h := range [...]struct {
		what  string
		held  bool
		lease Lease
	}{{"write", w.count > 0, o.wlease}, {"read", r.count > 0, o.rlease}} {
		if !h.held {
			continue
		}
		l := h.lease
		if l == 0 || uint64(l) > m.gen {
			return fmt.Errorf("%s lease %d outside (0, %d]", h.what, l, m.gen)
		}
		if m.gen-uint64(l) < leaseTable && (m.leaseRecs == nil || m.leaseRecs[uint64(l)&(leaseTable-1)] != o.idx) {
			return fmt.Errorf("the lease table forgot its %s lease %d", h.what, l)
		}
		v.leases = append(v.leases, l)
	}
	return nil
}

// verifyLeasesLocked checks the quarantine, that no lease is held twice,
// the lease table's size and the lookup hints' record numbers. (The lease
// table's entries are checked from the held leases, in
// verifyObjectLocked: a walk of all of them would cost 32,768 reads a
// call.)
func (m *Manager[K]) verifyLeasesLocked(v *verifier) error {
	var qbytes int64
	for l, q := range m.quarantine {
		if l == 0 || uint64(l) > m.gen {
			return fmt.Errorf("quarantined lease %d outside (0, %d]", l, m.gen)
		}
		if q.block.Size <= 0 {
			return fmt.Errorf("quarantined write %d (key %v) holds block %+v", l, q.key, q.block)
		}
		switch {
		case q.read && (!q.deleted || q.count <= 0):
			return fmt.Errorf("held read lease %d (key %v): deleted %v, %d holds", l, q.key, q.deleted, q.count)
		case !q.read && q.count != 0:
			return fmt.Errorf("held write lease %d (key %v) counts %d holds", l, q.key, q.count)
		case !q.deleted && q.expiry != endOfTime:
			return fmt.Errorf("quarantined lapsed write %d (key %v) lapses at %d", l, q.key, q.expiry)
		case q.expiry <= m.now:
			return fmt.Errorf("held lease %d (key %v) lapsed at %d, before %d, and is still held", l, q.key, q.expiry, m.now)
		case q.expiry < m.qnext:
			return fmt.Errorf("held lease %d (key %v) lapses at %d, before the sweep's next check at %d", l, q.key, q.expiry, m.qnext)
		}
		qbytes += q.block.Size
		v.leases = append(v.leases, l)
		v.blocks = append(v.blocks, q.block)
	}
	if qbytes != m.qbytes {
		return fmt.Errorf("quarantined bytes %d, the quarantined blocks hold %d", m.qbytes, qbytes)
	}
	slices.Sort(v.leases)
	for i := 1; i < len(v.leases); i++ {
		if v.leases[i] == v.leases[i-1] {
			return fmt.Errorf("lease %d is held twice (locks or quarantined writes)", v.leases[i])
		}
	}
	if len(m.leaseRecs) != 0 && len(m.leaseRecs) != leaseTable {
		return fmt.Errorf("a lease table of %d entries", len(m.leaseRecs))
	}
	if len(m.hints.recs) > maxHints {
		return fmt.Errorf("%d lookup hints, more than %d", len(m.hints.recs), maxHints)
	}
	records := m.objects.records()
	for i, r := range m.hints.recs {
		if r != 0 && (r < 0 || r >= records) {
			return fmt.Errorf("lookup hint %d names record %d of %d", i, r, records)
		}
	}
	return nil
}

// verifyIndexLocked checks the index against the live records.
func (m *Manager[K]) verifyIndexLocked(v *verifier) error {
	s := &m.objects
	if len(s.slots)&(len(s.slots)-1) != 0 {
		return fmt.Errorf("an index of %d slots", len(s.slots))
	}
	if s.n != v.live || s.n > 0 && 2*s.n > len(s.slots) {
		return fmt.Errorf("the index counts %d keys in %d slots; %d records are live", s.n, len(s.slots), v.live)
	}
	n := 0
	for p, sl := range s.slots {
		if sl.rec == 0 {
			continue
		}
		n++
		if sl.rec < 0 || sl.rec >= s.records() {
			return fmt.Errorf("index slot %d names record %d of %d", p, sl.rec, s.records())
		}
		o := s.rec(sl.rec)
		switch {
		case !o.live:
			return fmt.Errorf("index slot %d names record %d, which is not live", p, sl.rec)
		case v.marks[sl.rec]&markIndexed != 0:
			return fmt.Errorf("record %d is in two index slots", sl.rec)
		case sl.hash != o.hash:
			return fmt.Errorf("index slot %d has hash %#x, its record %d %#x", p, sl.hash, sl.rec, o.hash)
		case s.hash(&o.key) != o.hash:
			return fmt.Errorf("record %d (key %v) has hash %#x, its key %#x", sl.rec, o.key, o.hash, s.hash(&o.key))
		}
		v.marks[sl.rec] |= markIndexed
		if f, _ := s.find(&o.key, o.hash); f != o {
			return fmt.Errorf("record %d (key %v) is not found from its hash", sl.rec, o.key)
		}
	}
	if n != s.n {
		return fmt.Errorf("the index counts %d keys and holds %d", s.n, n)
	}
	return nil
}

// verifyBlocks checks that no two of bs, the blocks of the objects and
// quarantined writes, overlap.
func verifyBlocks(bs []allocator.Block) error {
	slices.SortFunc(bs, func(a, b allocator.Block) int { return cmp.Compare(a.Offset, b.Offset) })
	for i := 1; i < len(bs); i++ {
		if bs[i].Offset < bs[i-1].End() {
			return fmt.Errorf("blocks %+v and %+v overlap", bs[i-1], bs[i])
		}
	}
	return nil
}

// verifyQueueLocked checks expiry queue id against the records: with one
// live entry per record, as many live entries as records in the queue
// (counted in v) means each has its entry.
func (m *Manager[K]) verifyQueueLocked(id queueID, v *verifier) error {
	q := &m.queues[id]
	if q.head < 0 || q.head > len(q.ents) {
		return fmt.Errorf("expiry queue %d: head %d of %d entries", id, q.head, len(q.ents))
	}
	bit := uint8(1) << id
	entries := 0
	for i, e := range q.ents[q.head:] {
		if i > 0 && e.expiry < q.ents[q.head+i-1].expiry {
			return fmt.Errorf("expiry queue %d: entry %d expires at %d, before the one ahead of it (%d)", id, i, e.expiry, q.ents[q.head+i-1].expiry)
		}
		if e.rec <= 0 || e.rec >= m.objects.records() {
			return fmt.Errorf("expiry queue %d: entry %d names record %d of %d", id, i, e.rec, m.objects.records())
		}
		o := m.entryLocked(e, id)
		if o == nil {
			continue
		}
		if v.marks[e.rec]&bit != 0 {
			return fmt.Errorf("expiry queue %d: record %d has two live entries", id, e.rec)
		}
		v.marks[e.rec] |= bit
		entries++
		lock := o.read
		if id == writeQueue {
			lock = o.write
		}
		if e.expiry != lock.expiry {
			return fmt.Errorf("expiry queue %d: record %d's entry expires at %d, its lock at %d", id, e.rec, e.expiry, lock.expiry)
		}
	}
	if v.inQueue[id] != q.live || entries != q.live {
		return fmt.Errorf("expiry queue %d counts %d objects; %d records are in it, %d entries live", id, q.live, v.inQueue[id], entries)
	}
	return nil
}

// verifyEvictSetLocked checks the eviction policy's lists and counts.
func (m *Manager[K]) verifyEvictSetLocked(v *verifier) error {
	e := &m.ev
	s := &m.objects
	if v.members != e.n {
		return fmt.Errorf("the eviction set counts %d objects; %d records are in it", e.n, v.members)
	}
	mainIDs, err := e.main.verify(evMain)
	if err != nil {
		return fmt.Errorf("the eviction list: %w", err)
	}
	smallIDs, err := e.small.verify(evSmall)
	if err != nil {
		return fmt.Errorf("S3-FIFO's small queue: %w", err)
	}
	if len(mainIDs)+len(smallIDs) != e.n {
		return fmt.Errorf("the eviction set counts %d objects, its lists hold %d and %d", e.n, len(mainIDs), len(smallIDs))
	}
	var small int64
	for _, i := range smallIDs {
		small += s.rec(i).block.Size
	}
	if small != e.smallBytes {
		return fmt.Errorf("S3-FIFO's small queue counts %d bytes and holds %d", e.smallBytes, small)
	}
	if e.policy == EvictPrefix {
		if err := e.verifyRanked(mainIDs); err != nil {
			return err
		}
	}
	return e.ghost.verify()
}

// verify walks the list, checking its links, that it holds only objects in
// list q, and its head, tail and length; it returns the record numbers in
// order.
func (l *list[K]) verify(q evQueue) ([]int32, error) {
	ids := make([]int32, 0, l.len)
	prev := int32(0)
	for i := l.head; i != 0; i = l.s.rec(i).evl.next {
		if len(ids) > l.len {
			return nil, fmt.Errorf("more than its length %d objects, or a cycle", l.len)
		}
		if i < 0 || i >= l.s.records() {
			return nil, fmt.Errorf("a link to record %d of %d", i, l.s.records())
		}
		o := l.s.rec(i)
		switch {
		case !o.live || o.evq != q:
			return nil, fmt.Errorf("record %d (live %v, list %d) is linked in", i, o.live, o.evq)
		case o.evl.prev != prev:
			return nil, fmt.Errorf("record %d links back to %d, not %d", i, o.evl.prev, prev)
		}
		ids = append(ids, i)
		prev = i
	}
	if prev != l.tail || len(ids) != l.len {
		return nil, fmt.Errorf("tail %d and length %d, walked to %d over %d", l.tail, l.len, prev, len(ids))
	}
	return ids, nil
}

// verifyRanked checks, for the prefix policy, that the objects after the
// anchor in the list, order, are the current operation's live ranked
// entries: what settle sorts and relinks.
func (e *evictSet[K]) verifyRanked(order []int32) error {
	after := order
	if e.anchor != 0 {
		at := slices.Index(order, e.anchor)
		if at < 0 {
			return fmt.Errorf("the prefix policy's anchor, record %d, is not in its list", e.anchor)
		}
		after = order[at+1:]
	}
	ranked := 0
	for i, r := range e.ranked {
		if e.s.rec(r.idx).rank == uint32(i)+1 {
			ranked++
		}
	}
	for _, i := range after {
		o := e.s.rec(i)
		if o.rank == 0 || int(o.rank) > len(e.ranked) || e.ranked[o.rank-1].idx != i {
			return fmt.Errorf("record %d is after the prefix policy's anchor without a ranked entry (rank %d)", i, o.rank)
		}
	}
	if ranked != len(after) {
		return fmt.Errorf("the prefix policy has %d live ranked entries and %d objects after its anchor", ranked, len(after))
	}
	return nil
}

// verify checks the ghost queue's ring against its counts.
func (g *ghost) verify() error {
	if g.n < 0 || g.n > len(g.ring) || g.n > 0 && (g.head < 0 || g.head >= len(g.ring)) {
		return fmt.Errorf("the ghost queue holds %d of %d from %d", g.n, len(g.ring), g.head)
	}
	count := make(map[uint64]int32, len(g.count))
	for i := 0; i < g.n; i++ {
		count[g.ring[(g.head+i)%len(g.ring)]]++
	}
	if len(count) != len(g.count) {
		return fmt.Errorf("the ghost queue counts %d hashes and holds %d", len(g.count), len(count))
	}
	for h, c := range count {
		if g.count[h] != c {
			return fmt.Errorf("the ghost queue counts hash %#x %d times and holds it %d", h, g.count[h], c)
		}
	}
	return nil
}

// has reports whether record i is in the set.
func (r *recordSet) has(i int32) bool {
	w := int(i >> 6)
	if r.cur != 0 && w == r.cw {
		return r.cur&(1<<(i&63)) != 0
	}
	return w < len(r.words) && r.words[w]&(1<<(i&63)) != 0
}

// verify checks the bitmap against its summary and the cached word, and
// that the set holds nothing at or past records or at record 0.
func (r *recordSet) verify(records int32) error {
	if len(r.sum) != (len(r.words)+63)/64 {
		return fmt.Errorf("%d summary words for %d bitmap words", len(r.sum), len(r.words))
	}
	if r.cur != 0 && (r.cw >= len(r.words) || r.words[r.cw] != 0) {
		return fmt.Errorf("cached word %d is also in the bitmap", r.cw)
	}
	for w, x := range r.words {
		if (x != 0) != (r.sum[w>>6]&(1<<(w&63)) != 0) {
			return fmt.Errorf("bitmap word %d is %#x, its summary bit disagrees", w, x)
		}
		if x != 0 && w>>6 < r.lo {
			return fmt.Errorf("bitmap word %d has bits below the summary's low mark %d", w, r.lo)
		}
		if x != 0 && r.cur != 0 && w < r.cw {
			return fmt.Errorf("bitmap word %d has bits below the cached word %d", w, r.cw)
		}
	}
	if r.has(0) {
		return fmt.Errorf("record 0 is reusable")
	}
	for i := records; i < int32(len(r.words))<<6; i++ {
		if r.has(i) {
			return fmt.Errorf("record %d of %d is reusable", i, records)
		}
	}
	return nil
}
