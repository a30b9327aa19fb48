//go:build linux

package server

import (
	"context"
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// lookup answers a lookup (PROTOCOL.md, "The L2 tier"): the longest
// prefix of keys readable in L1, locking nothing; then, with an L2 store,
// the run of keys after it that L2 holds (their headers, not their
// bytes), of which it counts the part that pays by the break-even rule
// (judge, in l2rate.go: the daemon's estimate of its load rate against
// MinRate, and the request's budget, q.Size microseconds); and with the
// prefetch flag the start of that part's loading into L1. With expected
// sizes (q.Sizes, PROTOCOL.md "Expected sizes") both stop at the first
// key of another size than its reader expects, and a key L1 holds in
// another size ends the lookup. An empty L2 value ends the L2 run
// always: no L1 object is empty. It runs outside the gate and takes it
// around its l1 calls only, never across L2's network calls, so a slow
// L2 holds up this connection alone. L2 never makes it fail.
func (s *Server) lookup(q *wire.Request, a *wire.Answer) {
	if q.Size < 0 || q.Size > wire.MaxWait {
		a.Code = wire.CodeInvalidArgument
		a.Message = fmt.Sprintf("lookup budget %d µs outside [0, %d]", q.Size, wire.MaxWait)
		return
	}
	if !checkSizes(q, a) {
		return
	}
	if s.l2IgnoreSizes.Load() {
		q.Sizes = q.Sizes[:0] // the deliberate bug: the sizes go unread
	}
	s.gate.RLock()
	n, other := s.l1Prefix(q.Keys, q.Sizes)
	s.gate.RUnlock()
	a.Lookup = wire.Lookup{N: uint32(len(q.Keys)), L1: uint32(n)}
	s.l2cnt.lookups.Add(1)
	s.l2cnt.l1Hits.Add(uint64(n))
	if other {
		// L1 holds key n in another layout: it cannot be loaded here
		// while that object is, so L2 adds nothing past it.
		s.l2cnt.sizeL1.Add(1)
		return
	}
	t := s.l2
	if t == nil || n == len(q.Keys) {
		return
	}
	rest := q.Keys[n:]
	// The budget bounds the L2 part of the lookup too: the header reads
	// are cut at it (a miss), as the tier's timeout cuts them without one
	// (kvallocd's is at most l2.MaxTimeout); maxLookupL2 is a backstop
	// for a store whose timeout is longer.
	wait := maxLookupL2
	if q.Size > 0 {
		wait = time.Duration(q.Size) * time.Microsecond
	}
	ctx, cancel := context.WithTimeout(t.ctx, wait)
	defer cancel()
	sizes := t.store.Head(ctx, rest)
	m := 0
	for m < len(sizes) && sizes[m] > 0 && (len(q.Sizes) == 0 || sizes[m] == q.Sizes[n+m]) {
		m++
	}
	if m < len(sizes) && sizes[m] >= 0 {
		s.l2cnt.sizeL2.Add(1) // a valid value, empty or of another size
	}
	v := judge(t.rate.estimate(), t.cfg.MinRate, time.Duration(q.Size)*time.Microsecond, t.batching(), sizes[:m])
	if s.countUnpaidL2.Load() {
		v = l2Verdict{paid: m} // the deliberate bug: every hit counts
	}
	a.Lookup.L2 = uint32(v.paid)
	s.l2cnt.l2Hits.Add(uint64(v.paid))
	s.l2cnt.l2Slow.Add(uint64(v.slow))
	s.l2cnt.l2Late.Add(uint64(v.late))
	if q.Flags&wire.FlagPrefetch == 0 {
		return
	}
	if v.paid > 0 {
		a.Lookup.Prefetch = uint32(t.prefetch(rest[:v.paid], sizes[:v.paid]))
		return
	}
	// Nothing pays: without a new measure the estimate would refuse for
	// ever, so once per ProbeInterval one such lookup loads a batch of
	// what it found, behind its answer, which stays L2 = 0.
	if m > 0 && t.rate.probeDue(time.Now(), t.cfg.ProbeInterval) {
		k := t.batching().end(sizes[:m], 0)
		s.l2cnt.probes.Add(uint64(t.prefetch(rest[:k], sizes[:k])))
	}
}

// checkSizes refuses, with INVALID_ARGUMENT in a, expected sizes below 1
// (no L1 object is empty): false when it did.
func checkSizes(q *wire.Request, a *wire.Answer) bool {
	for i, z := range q.Sizes {
		if z < 1 {
			a.Code = wire.CodeInvalidArgument
			a.Message = fmt.Sprintf("expected size %d of key %d: an object is at least 1 byte", z, i)
			return false
		}
	}
	return true
}

// maxLookupL2 is the most a lookup without a budget waits for L2: past
// l2.MaxTimeout, and within a client's default deadline (10 s).
const maxLookupL2 = 8 * time.Second

// batching is how the tier's prefetches cut their keys into gets.
func (t *l2tier) batching() batching {
	return batching{keys: t.cfg.PrefetchBatch, bytes: t.cfg.PrefetchBytes}
}

// l1Prefix is the number of leading keys whose object is finished and not
// being written (and, with sizes, is sizes[i] bytes): what
// reserve_read_prefix_wait with those sizes would lock now. other
// reports that it stopped at an object of another size.
func (s *Server) l1Prefix(keys []l1.ObjectKey, sizes []int64) (n int, other bool) {
	for i, k := range keys {
		st, ok := s.mgr.State(k)
		if !ok || !st.Finished || st.WriteLocked {
			return i, false
		}
		if len(sizes) > 0 && st.Size != sizes[i] {
			return i, true
		}
	}
	return len(keys), false
}

// readPrefixSized is reserve_read_prefix with expected sizes (under the
// gate, shared): the prefix also stops at the first key whose object is
// finished in another size than sizes[i], which is answered
// SIZE_MISMATCH, unlocked, the keys after it SKIPPED. Objects are
// checked before l1 locks (so a mismatch is not locked at all) and
// again once locked, since another connection may have deleted a key
// with force and written it again in between: a locked object that is
// no longer the key's, or not of its size, is let go again and the
// prefix ends there. A locked object cannot change its size.
func (s *Server) readPrefixSized(keys []l1.ObjectKey, sizes []int64, locks int) ([]l1.Result, int, error) {
	m := s.mgr
	// The keys l1 is asked: up to the first of another size, or up to and
	// including the first l1 would stop at anyway (absent, being
	// written), which l1 then judges; the rest are SKIPPED unasked.
	j, other := 0, false
	for ; j < len(keys); j++ {
		st, ok := m.State(keys[j])
		if !ok || !st.Finished || st.WriteLocked {
			j++
			break
		}
		if st.Size != sizes[j] {
			other = true
			break
		}
	}
	res, n, err := m.ReserveReadPrefix(keys[:j], locks)
	if err != nil {
		return nil, 0, err
	}
	stop, why := n, l1.Skipped
	for i := range n {
		st, ok := m.State(keys[i])
		if !ok {
			stop, why = i, l1.KeyNotExist
			break
		}
		if st.Block != res[i].Block || st.Size != sizes[i] {
			stop, why = i, l1.Status(wire.StatusSizeMismatch)
			break
		}
	}
	if stop < n {
		back := make([]l1.Lease, n-stop)
		for i := range back {
			back[i] = res[stop+i].Lease
		}
		if _, err := m.FinishRead(keys[stop:n], back, locks); err != nil {
			return nil, 0, err
		}
		for i := stop; i < n; i++ {
			res[i] = l1.Result{Status: l1.Skipped}
		}
		res[stop].Status = why
		n = stop
	} else if other && n == j {
		res = append(res, l1.Result{Status: l1.Status(wire.StatusSizeMismatch)})
		j++
	}
	for ; j < len(keys); j++ {
		res = append(res, l1.Result{Status: l1.Skipped})
	}
	for i := range res {
		if res[i].Status == l1.Status(wire.StatusSizeMismatch) {
			s.l2cnt.sizeRead.Add(1)
		}
	}
	return res, n, nil
}

// prefetch reserves L1 blocks for keys (mode new, the daemon's own
// writes), in order, stopping at the first it cannot reserve, and starts
// loading them from L2. A key another prefetch is loading counts as
// being loaded. It returns how many leading keys are being loaded.
func (t *l2tier) prefetch(keys []l1.ObjectKey, sizes []int64) int {
	s := t.s
	var mine []l1.ObjectKey
	var leases []l1.Lease
	var blocks []l1.Result
	var lens []int64
	var dones []*loading
	s.gate.RLock()
	t.mu.Lock()
	n := 0
	for n < len(keys) && !t.closed && !t.paused {
		if _, ok := t.pending[keys[n]]; ok {
			n++
			continue
		}
		if t.inflight >= t.cfg.MaxPrefetch {
			break
		}
		// One reserve_write per run of keys of one size.
		j := n + 1
		for j < len(keys) && sizes[j] == sizes[n] && j-n < t.cfg.MaxPrefetch-t.inflight {
			if _, ok := t.pending[keys[j]]; ok {
				break
			}
			j++
		}
		size := sizes[n] // at least 1: lookup ends its run at an empty value
		// l1 keeps the keys it reserves: they must not alias the frame,
		// which the next request overwrites (wire.Decoder.Borrow).
		run := make([]l1.ObjectKey, j-n)
		for i := range run {
			run[i] = cloneKey(&keys[n+i])
		}
		res, err := s.mgr.ReserveWrite(run, nil, size, l1.ModeNew)
		if err != nil {
			break
		}
		got := 0
		for got < len(res) && res[got].Status == l1.OK {
			got++
		}
		// Give back any grant past the first refusal: the prefix is
		// what counts.
		var back []l1.ObjectKey
		var backL []l1.Lease
		for i := got; i < len(res); i++ {
			if res[i].Status == l1.OK {
				back, backL = append(back, run[i]), append(backL, res[i].Lease)
			}
		}
		if len(back) > 0 {
			_, _ = s.mgr.AbortWrite(back, backL)
		}
		for i := range got {
			k := run[i]
			ld := &loading{done: make(chan struct{})}
			t.pending[k] = ld
			t.inflight++
			mine, leases, blocks, lens, dones = append(mine, k), append(leases, res[i].Lease),
				append(blocks, res[i]), append(lens, sizes[n+i]), append(dones, ld)
		}
		t.own.writes.addAll(run[:got], res[:got], 1)
		n += got
		if got < len(res) {
			break
		}
	}
	var ctx context.Context
	if len(mine) > 0 {
		t.wg.Add(1)
		t.busy++ // a pause waits for this load
		ctx = t.run
	}
	t.mu.Unlock()
	s.gate.RUnlock()
	if len(mine) > 0 {
		s.l2cnt.prefetched.Add(uint64(len(mine)))
		go t.load(ctx, mine, leases, blocks, lens, dones)
	}
	return n
}

// load fetches prefetched keys from L2, a batch at a time, checks each
// payload of the right size as it copies it into its block (Store.Load)
// and finishes it;
// every other key (a miss, a bad value, a timeout, the daemon closing,
// a pause: ctx cancelled) is aborted. Each key's waiters are woken once
// it is finished or aborted.
func (t *l2tier) load(ctx context.Context, keys []l1.ObjectKey, leases []l1.Lease, blocks []l1.Result, sizes []int64, dones []*loading) {
	defer t.wg.Done()
	defer t.leave()
	s := t.s
	pool := s.pool.Bytes()
	for at, end := 0, 0; at < len(keys); at = end {
		end = t.batching().end(sizes, at)
		ks, ls := keys[at:end], leases[at:end]
		// Each payload is checked as it is copied straight into its
		// block (the block is the daemon's write, so nothing reads it
		// before the finish, and a refused one is aborted).
		dst := make([][]byte, len(ks))
		var ok []bool
		if ctx.Err() == nil {
			for i := range ks {
				if b := blocks[at+i].Block; sizes[at+i] <= b.Size {
					dst[i] = pool[b.Offset : b.Offset+sizes[at+i]]
				}
			}
			start := time.Now()
			ok = t.store.Load(ctx, ks, dst)
			if ctx.Err() == nil { // a get cut short by the daemon's end or a pause measures nothing
				var bytes int64
				for i := range ok {
					if ok[i] {
						bytes += int64(len(dst[i]))
					}
				}
				now := time.Now()
				t.rate.observe(bytes, now.Sub(start), now)
			}
		}
		var okK, badK []l1.ObjectKey
		var okL, badL []l1.Lease
		for i := range ks {
			if ok != nil && ok[i] && dst[i] != nil {
				// The block's bytes past the payload (up to the
				// alignment) are whatever an earlier object left there:
				// a reader is handed the whole block, so they go.
				if b := blocks[at+i].Block; !s.l2DirtyTail.Load() { // the deliberate bug leaves them
					clear(pool[b.Offset+int64(len(dst[i])) : b.Offset+b.Size])
				}
				okK, okL = append(okK, ks[i]), append(okL, ls[i])
			} else if s.l2PublishUnchecked.Load() {
				// The deliberate bug: a key whose value missed or failed
				// its checks is finished all the same, its block unloaded.
				okK, okL = append(okK, ks[i]), append(okL, ls[i])
			} else {
				badK, badL = append(badK, ks[i]), append(badL, ls[i])
			}
		}
		s.l2cnt.loaded.Add(uint64(len(okK)))
		s.l2cnt.failed.Add(uint64(len(badK)))
		s.gate.RLock()
		if len(okK) > 0 {
			_, _ = s.mgr.FinishWrite(okK, okL)
		}
		if len(badK) > 0 {
			_, _ = s.mgr.AbortWrite(badK, badL)
		}
		t.mu.Lock()
		for i := range ks {
			t.own.dropWrite(ls[i])
			delete(t.pending, ks[i])
			t.inflight--
		}
		t.mu.Unlock()
		s.gate.RUnlock()
		for i := range ks {
			close(dones[at+i].done)
		}
	}
}

// l2wait is reserve_read_prefix_wait's wait, before the gate: it checks
// the wait and the expected sizes (false, with INVALID_ARGUMENT in a,
// when out of range) and
// waits, up to it, for the prefetches loading any of q's keys.
func (s *Server) l2wait(q *wire.Request, a *wire.Answer) bool {
	if q.Size < 0 || q.Size > wire.MaxWait {
		a.Code = wire.CodeInvalidArgument
		a.Message = fmt.Sprintf("wait %d µs outside [0, %d]", q.Size, wire.MaxWait)
		return false
	}
	if !checkSizes(q, a) {
		return false
	}
	if s.l2IgnoreSizes.Load() {
		q.Sizes = q.Sizes[:0] // the deliberate bug: the sizes go unread
	}
	t := s.l2
	if q.Size == 0 || t == nil {
		return true
	}
	deadline := time.NewTimer(time.Duration(q.Size) * time.Microsecond)
	defer deadline.Stop()
	for i := range q.Keys {
		t.mu.Lock()
		ld := t.pending[q.Keys[i]]
		t.mu.Unlock()
		if ld == nil {
			continue
		}
		select {
		case <-ld.done:
		case <-deadline.C:
			return true
		}
	}
	return true
}
