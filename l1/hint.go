package l1

// Lookup hints.
//
// A KV cache names the same keys, in the same order, in the call that
// finishes what an earlier call began: FinishWrite (or AbortWrite) the
// keys of a ReserveWrite, FinishRead the keys of a ReserveRead; a request
// that stores and then reads its chunks names one list throughout. So the
// manager remembers, for each position of the last batch call, the
// record the key at that position had (hints.recs), and a call first tries
// the record remembered for its position: when that record is live and
// holds an equal key, it is the key's record (the index maps a key to one
// record), and the lookup costs one key comparison instead of a hash and a
// probe. When it is not, the call looks the key up as usual. The hint is
// only a guess that the comparison confirms, so the answers never depend on
// it: a caller that names other keys, or the same ones in another order,
// gets the same results and pays one comparison per key for the wrong
// guesses, and a call stops guessing once its wrong guesses outnumber its
// right ones by hintSlack, so a call of unrelated keys pays at most
// hintSlack comparisons more (BenchmarkLookupHints).
//
// The hints are the manager's, under its lock, not a caller's: callers that
// interleave calls with keys of their own overwrite each other's hints, and
// then look keys up as before.
//
// Lease guesses. The calls that present leases (FinishWrite, AbortWrite,
// FinishWriteAndReserveRead, FinishRead) also guess from the lease: each
// lease handed out records its object's record number in a small table
// indexed by the lease's low bits (leaseRecs, leaseTable entries), so a
// lease presented before leaseTable later leases were handed out names its
// record directly. A serving engine finishes a request's keys after other
// requests' calls have overwritten the position hints, so this is the
// guess that holds there. It is confirmed as the position hint is (a live
// record holding an equal key), so it never changes an answer; a lease
// that is stale, foreign or too old only costs the comparison.

// hintSlack is how many more wrong guesses than right ones a call makes
// before it stops guessing.
const hintSlack = 8

// maxHints bounds the positions remembered (4 bytes each): keys past it in
// a larger call are looked up as usual.
const maxHints = 1 << 16

// hints are the records the last batch calls found, by key position.
type hints struct {
	recs         []int32 // record numbers; 0: no guess
	hits, misses int     // this call's right and wrong guesses
}

// beginHints starts a batch call of n keys.
func (m *Manager[K]) beginHints(n int) {
	h := &m.hints
	if n = min(n, maxHints); n > len(h.recs) {
		h.recs = append(h.recs, make([]int32, n-len(h.recs))...)
	}
	h.hits, h.misses = 0, 0
}

// hintLocked returns the live record that holds key, if the hint for
// position i names it; nil otherwise. It applies no lapsed lock.
func (m *Manager[K]) hintLocked(i int, key *K) *object[K] {
	h := &m.hints
	if i >= len(h.recs) || h.misses > h.hits+hintSlack {
		return nil
	}
	r := h.recs[i]
	if r == 0 {
		return nil
	}
	if o := m.objects.rec(r); o.live && m.objects.equal(&o.key, key) {
		h.hits++
		return o
	}
	h.misses++
	return nil
}

// setHint remembers o, or nil, as the record of position i.
func (m *Manager[K]) setHint(i int, o *object[K]) {
	if i >= len(m.hints.recs) {
		return
	}
	if o == nil {
		m.hints.recs[i] = 0
	} else {
		m.hints.recs[i] = o.idx
	}
}

// lookupAtLocked is lookupLocked for keys[i] of a batch call that called
// beginHints.
func (m *Manager[K]) lookupAtLocked(i int, key *K, now int64) *object[K] {
	o := m.hintLocked(i, key)
	if o == nil {
		o = m.lookupLocked(key, now)
	} else if o.anyLapsed(now) && !m.lapseLocked(o, now) {
		o = nil
	}
	m.setHint(i, o)
	return o
}

// leaseTable is the number of leases whose records the manager remembers
// (4 bytes each: 128 KiB).
const leaseTable = 1 << 15

// noteLease remembers o's record as the one lease l was handed out for.
func (m *Manager[K]) noteLease(l Lease, o *object[K]) {
	if m.leaseRecs == nil {
		m.leaseRecs = make([]int32, leaseTable)
	}
	m.leaseRecs[uint64(l)&(leaseTable-1)] = o.idx
}

// lookupLeaseLocked is lookupAtLocked for keys[i] presented with lease l:
// it first tries the record l was handed out for.
func (m *Manager[K]) lookupLeaseLocked(i int, key *K, l Lease, now int64) *object[K] {
	if m.leaseRecs != nil {
		if r := m.leaseRecs[uint64(l)&(leaseTable-1)]; r != 0 {
			if o := m.objects.rec(r); o.live && m.objects.equal(&o.key, key) {
				if o.anyLapsed(now) && !m.lapseLocked(o, now) {
					o = nil
				}
				m.setHint(i, o)
				return o
			}
		}
	}
	return m.lookupAtLocked(i, key, now)
}
