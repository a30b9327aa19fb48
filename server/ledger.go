//go:build linux

package server

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/kvalloc/kvalloc/l1"
)

// ledger is what one connection owns: its write reservations and its read
// holds, each under the lease l1 handed out. It is touched only by the
// connection's goroutine, under the server's gate (shared), and read by
// Check under the gate (exclusive); the totals are atomics for the
// metrics, which read them without the gate.
//
// Leases are unique per manager, so a write lease names one reservation
// and a read lease one (object, read epoch); the key is kept to refuse a
// lease presented with another key, and to release at the end. The keys
// it is given may alias a frame that the next read overwrites (see
// wire.Decoder.Borrow): it copies what it keeps.
type ledger struct {
	writes holdSet // the bytes asked, per reservation
	reads  holdSet // read locks per (key, lease)
	// nwrites is the reservations held, as of the last publish.
	nwrites atomic.Int64
	// handles is the table of the connection's handles (handles.go),
	// handing out none until a version 2 hello turns it on.
	handles *handleTable
}

func newLedger() *ledger {
	l := &ledger{handles: &handleTable{}}
	l.writes.tab, l.writes.kind = l.handles, handleWrite
	l.reads.tab, l.reads.kind = l.handles, handleRead
	return l
}

// useHandles gives every hold recorded from now on a handle, as a version
// 2 connection's holds have (PROTOCOL.md, "Version 2: key handles"). It is
// called at the hello, before anything is held, outside the gate: the
// table's switch is atomic for Verify.
func (l *ledger) useHandles(anyLease bool) {
	l.writes.anyLease, l.reads.anyLease = anyLease, anyLease
	l.handles.on.Store(true)
}

func (l *ledger) ownsWrite(k *l1.ObjectKey, lease l1.Lease) bool { return l.writes.held(k, lease) > 0 }
func (l *ledger) dropWrite(lease l1.Lease)                       { l.writes.drop(lease) }
func (l *ledger) heldReads(k *l1.ObjectKey, lease l1.Lease) int64 {
	return l.reads.held(k, lease)
}
func (l *ledger) subRead(lease l1.Lease, locks int) { l.reads.sub(lease, int64(locks)) }
func (l *ledger) dropRead(lease l1.Lease)           { l.reads.drop(lease) }

// publish makes the totals current, for the metrics: the connection
// calls it after each request, rather than an atomic add per hold.
func (l *ledger) publish() {
	l.writes.publish()
	l.reads.publish()
	l.nwrites.Store(int64(l.writes.len()))
}

// clear forgets everything, once released.
func (l *ledger) clear() {
	l.writes.clear()
	l.reads.clear()
	l.nwrites.Store(0)
	l.handles.recs, l.handles.free = nil, nil
}

// holdSet maps leases to holds: a key and a count. It is built for the
// pattern of a serving engine's calls, where one call grants a batch of
// thousands of keys and a later call gives them all back:
//
//   - l1 hands out the leases of one call from one counter under one lock,
//     so a batch's new leases are consecutive. addAll stores them as a run,
//     a slice indexed by lease minus its first: no hashing, no per-key
//     allocation. Leases that do not fit a dense run (a read lease shared
//     with an older epoch, a sparse batch) go to a map.
//   - A run holds no pointer per key: its chunk hashes are copied into one
//     byte slice, its models and salts into a small table, and each hold
//     names its key by offset and index. So a run of thousands of keys
//     costs the garbage collector one object to scan, not three strings a
//     key, and recording or dropping a hold costs no write barrier.
//   - Leases only grow, so a lease above the highest ever added is new to
//     the set and needs no lookup; runs are appended in lease order, so
//     a lookup is a check of the run last found, else a binary search.
//   - A run goes when its last hold does; its slices are kept for the
//     next run (one spare), so a steady cycle allocates nothing here.
//
// Measured against one Go map per ledger (BenchmarkDaemonCycle), runs took
// the ownership bookkeeping of a 5700-key cycle from about a quarter of
// the daemon's time to a few percent; runs without pointers took off the
// collector's share of it (server/DESIGN.md, "Numbers").
type holdSet struct {
	runs  []holdRun
	other map[l1.Lease]otherHold
	max   l1.Lease     // the highest lease added
	hint  int          // the run last found
	count int64        // the holds
	total atomic.Int64 // count, as of the last publish

	spare holdRun           // an emptied run's slices, for the next
	index map[string]uint32 // addAll's scratch: the run's strings

	// tab, on a version 2 connection, hands each hold a handle when it
	// becomes live and takes it back when it goes (handles.go); kind is
	// what the table records the set's holds as.
	tab  *handleTable
	kind uint8
	// anyLease is a deliberate bug, set only by the bite tests
	// (Server.handlesAnyLease): resolve takes whatever hold a handle
	// names, whatever lease is presented.
	anyLease bool
}

// hold is one lease's holds in a run, and where its key is: no pointers.
type hold struct {
	n           int64
	off         uint32 // the chunk hash is hashes[off : off+hlen]
	rank, group uint32
	model, salt uint32 // indices into the run's strs
	handle      uint32 // version 2: the hold's handle while n > 0; else 0
	hlen        uint16
}

type holdRun struct {
	lo     l1.Lease
	h      []hold // h[i] is lease lo+i; n == 0: not held
	live   int    // holds with n > 0
	hashes []byte
	strs   []string
}

// otherHold is a hold outside the runs: its key, copied.
type otherHold struct {
	key    l1.ObjectKey
	n      int64
	handle uint32 // version 2: the hold's handle; else 0
}

// Limits of a run's encoding: a batch past them goes to the map.
const (
	maxRunHash  = math.MaxUint16 // one chunk hash's bytes
	maxRunBytes = math.MaxUint32 // a run's chunk hash bytes
)

// key returns hold h's key, in strings of its own.
func (r *holdRun) key(h *hold) l1.ObjectKey {
	return l1.ObjectKey{
		ChunkHash: string(r.hashes[h.off : h.off+uint32(h.hlen)]),
		Model:     r.strs[h.model], CacheSalt: r.strs[h.salt],
		KVRank: h.rank, GroupID: h.group,
	}
}

// is reports whether hold h's key is k.
func (r *holdRun) is(h *hold, k *l1.ObjectKey) bool {
	return h.rank == k.KVRank && h.group == k.GroupID && int(h.hlen) == len(k.ChunkHash) &&
		string(r.hashes[h.off:h.off+uint32(h.hlen)]) == k.ChunkHash &&
		r.strs[h.model] == k.Model && r.strs[h.salt] == k.CacheSalt
}

// set makes h the hold of key k, copying its chunk hash into the run. prev
// is the hold set last in this run, or nil: a key with its model and salt
// takes its indices.
func (s *holdSet) set(r *holdRun, h, prev *hold, k *l1.ObjectKey) {
	h.off, h.hlen = uint32(len(r.hashes)), uint16(len(k.ChunkHash))
	r.hashes = append(r.hashes, k.ChunkHash...)
	h.rank, h.group = k.KVRank, k.GroupID
	if prev != nil && r.strs[prev.model] == k.Model && r.strs[prev.salt] == k.CacheSalt {
		h.model, h.salt = prev.model, prev.salt
		return
	}
	h.model, h.salt = s.sid(r, k.Model), s.sid(r, k.CacheSalt)
}

// sid returns the index of str in r's table, adding a copy when new. set
// calls it only when a key's model or salt is not the last key's, so a
// map (cleared per run) is cheap enough.
func (s *holdSet) sid(r *holdRun, str string) uint32 {
	if n := len(r.strs); n > 0 && r.strs[n-1] == str {
		return uint32(n - 1)
	}
	if i, ok := s.index[str]; ok {
		return i
	}
	if s.index == nil {
		s.index = make(map[string]uint32)
	}
	str = strings.Clone(str)
	s.index[str] = uint32(len(r.strs))
	r.strs = append(r.strs, str)
	return uint32(len(r.strs) - 1)
}

// addAll records n holds of each key whose result is OK, under its lease.
func (s *holdSet) addAll(keys []l1.ObjectKey, res []l1.Result, n int64) {
	s.addAllHandles(keys, res, n, nil)
}

// addAllHandles is addAll that also sets, when out is not nil (one per
// result), out[i] to the handle of the hold result i was recorded in, and
// to 0 for a result that is not OK.
func (s *holdSet) addAllHandles(keys []l1.ObjectKey, res []l1.Result, n int64, out []uint32) {
	if out != nil {
		clear(out)
	}
	var lo, hi l1.Lease
	fresh, bytes, long := 0, 0, false
	old := s.max // leases above it are new to the set
	for i := range res {
		r := &res[i]
		if r.Status != l1.OK {
			continue
		}
		if r.Lease <= old {
			h := s.addOne(&keys[i], r.Lease, n)
			if out != nil {
				out[i] = h
			}
			continue
		}
		if fresh == 0 || r.Lease < lo {
			lo = r.Lease
		}
		hi = max(hi, r.Lease)
		fresh++
		bytes += len(keys[i].ChunkHash)
		long = long || len(keys[i].ChunkHash) > maxRunHash
	}
	if fresh == 0 {
		return
	}
	span := int(hi - lo + 1)
	if span > fresh+fresh/4+8 || long || bytes > maxRunBytes {
		// Too sparse for a run, or too big for its encoding.
		for i := range res {
			if r := &res[i]; r.Status == l1.OK && r.Lease > old {
				h := s.addOther(&keys[i], r.Lease, n)
				if out != nil {
					out[i] = h
				}
			}
		}
		s.max = hi
		return
	}
	run := s.newRun(lo, span, bytes)
	clear(s.index)
	var prev *hold
	for i := range res {
		r := &res[i]
		if r.Status != l1.OK || r.Lease <= old {
			continue
		}
		h := &run.h[r.Lease-lo]
		if h.n == 0 {
			s.set(&run, h, prev, &keys[i])
			prev = h
			run.live++
			h.handle = s.tab.alloc(r.Lease, s.kind)
		}
		h.n += n
		s.count += n
		if out != nil {
			out[i] = h.handle
		}
	}
	s.runs = append(s.runs, run)
	s.max = hi
}

// newRun returns an empty run of span leases from lo, with room for bytes
// of chunk hashes, on the spare's slices when they are big enough.
func (s *holdSet) newRun(lo l1.Lease, span, bytes int) holdRun {
	sp := &s.spare
	run := holdRun{lo: lo}
	if cap(sp.h) >= span {
		run.h = sp.h[:span]
		clear(run.h)
		sp.h = nil
	} else {
		run.h = make([]hold, span)
	}
	if cap(sp.hashes) >= bytes {
		run.hashes = sp.hashes[:0]
		sp.hashes = nil
	} else {
		run.hashes = make([]byte, 0, bytes)
	}
	run.strs, sp.strs = sp.strs[:0], nil
	return run
}

// addOne adds n holds of k under a lease the set may know, and returns
// the hold's handle. A lease names one object, so a lease already in a run
// comes with the key it has.
func (s *holdSet) addOne(k *l1.ObjectKey, lease l1.Lease, n int64) uint32 {
	if r, i := s.find(lease); r >= 0 {
		run := &s.runs[r]
		if h := &run.h[i]; h.n > 0 || run.is(h, k) {
			if h.n == 0 {
				run.live++
				h.handle = s.tab.alloc(lease, s.kind)
			}
			h.n += n
			s.count += n
			return h.handle
		}
		// An emptied slot with another key: the key lives in the map,
		// which lookups of an emptied slot consult.
	}
	return s.addOther(k, lease, n)
}

func (s *holdSet) addOther(k *l1.ObjectKey, lease l1.Lease, n int64) uint32 {
	if s.other == nil {
		s.other = map[l1.Lease]otherHold{}
	}
	h, ok := s.other[lease]
	if !ok {
		h.key = l1.ObjectKey{ChunkHash: strings.Clone(k.ChunkHash), Model: strings.Clone(k.Model),
			CacheSalt: strings.Clone(k.CacheSalt), KVRank: k.KVRank, GroupID: k.GroupID}
		h.handle = s.tab.alloc(lease, s.kind)
	}
	h.n += n
	s.other[lease] = h
	s.count += n
	s.max = max(s.max, lease)
	return h.handle
}

// find returns the run and slot of lease, or -1.
func (s *holdSet) find(lease l1.Lease) (int, int) {
	if lease > s.max || len(s.runs) == 0 {
		return -1, 0
	}
	if s.hint < len(s.runs) {
		if r := &s.runs[s.hint]; lease >= r.lo && lease < r.lo+l1.Lease(len(r.h)) {
			return s.hint, int(lease - r.lo)
		}
	}
	// The last run whose lo ≤ lease.
	j, found := slices.BinarySearchFunc(s.runs, lease, func(r holdRun, l l1.Lease) int { return cmp.Compare(r.lo, l) })
	if !found {
		j--
	}
	if j < 0 {
		return -1, 0
	}
	if r := &s.runs[j]; lease < r.lo+l1.Lease(len(r.h)) {
		s.hint = j
		return j, int(lease - r.lo)
	}
	return -1, 0
}

// held returns the holds of k under lease.
func (s *holdSet) held(k *l1.ObjectKey, lease l1.Lease) int64 {
	if r, i := s.find(lease); r >= 0 {
		run := &s.runs[r]
		if h := &run.h[i]; h.n > 0 {
			if run.is(h, k) {
				return h.n
			}
			return 0
		}
	}
	if h, ok := s.other[lease]; ok && h.key == *k {
		return h.n
	}
	return 0
}

// sub takes n holds back from lease.
func (s *holdSet) sub(lease l1.Lease, n int64) {
	if r, i := s.find(lease); r >= 0 {
		if h := &s.runs[r].h[i]; h.n > 0 {
			n = min(n, h.n)
			h.n -= n
			s.count -= n
			if h.n == 0 {
				s.tab.release(h.handle)
				h.handle = 0
				s.emptied(r)
			}
			return
		}
	}
	if h, ok := s.other[lease]; ok {
		n = min(n, h.n)
		h.n -= n
		s.count -= n
		if h.n == 0 {
			s.tab.release(h.handle)
			delete(s.other, lease)
		} else {
			s.other[lease] = h
		}
	}
}

// drop forgets every hold under lease.
func (s *holdSet) drop(lease l1.Lease) {
	if r, i := s.find(lease); r >= 0 {
		if h := &s.runs[r].h[i]; h.n > 0 {
			s.count -= h.n
			h.n = 0
			s.tab.release(h.handle)
			h.handle = 0
			s.emptied(r)
			return
		}
	}
	if h, ok := s.other[lease]; ok {
		s.count -= h.n
		s.tab.release(h.handle)
		delete(s.other, lease)
	}
}

// spareHolds and spareHashes bound the spare's slices (entries, and bytes
// of chunk hashes): a 5700-key cycle's runs fit and are reused, and one
// huge batch does not stay with its connection after its holds are gone.
const (
	spareHolds  = 8192
	spareHashes = 256 << 10
)

// emptied notes that a hold of run r has no holds left; the run goes with
// its last, its slices kept as the spare when they are bigger, within
// spareHolds and spareHashes.
func (s *holdSet) emptied(r int) {
	run := &s.runs[r]
	if run.live--; run.live > 0 {
		return
	}
	if cap(run.h) > cap(s.spare.h) && cap(run.h) <= spareHolds {
		s.spare.h = run.h
	}
	if cap(run.hashes) > cap(s.spare.hashes) && cap(run.hashes) <= spareHashes {
		s.spare.hashes = run.hashes
	}
	if cap(run.strs) > cap(s.spare.strs) && cap(run.strs) <= spareHolds {
		clear(run.strs[:cap(run.strs)])
		s.spare.strs = run.strs
	}
	s.runs = slices.Delete(s.runs, r, r+1)
	s.hint = 0
}

// leaseHold is one entry of a holdSet, for release and Check.
type leaseHold struct {
	lease  l1.Lease
	key    l1.ObjectKey
	n      int64
	handle uint32
}

// all returns every hold, in lease order.
func (s *holdSet) all() []leaseHold {
	var out []leaseHold
	for _, r := range s.runs {
		for i := range r.h {
			if h := &r.h[i]; h.n > 0 {
				out = append(out, leaseHold{r.lo + l1.Lease(i), r.key(h), h.n, h.handle})
			}
		}
	}
	for lease, h := range s.other {
		out = append(out, leaseHold{lease, h.key, h.n, h.handle})
	}
	if len(s.other) > 0 {
		slices.SortFunc(out, func(a, b leaseHold) int { return cmp.Compare(a.lease, b.lease) })
	}
	return out
}

// len returns the number of leases held.
func (s *holdSet) len() int {
	n := len(s.other)
	for _, r := range s.runs {
		n += r.live
	}
	return n
}

func (s *holdSet) clear() {
	s.runs, s.other, s.max, s.hint = nil, nil, 0, 0
	s.spare, s.index = holdRun{}, nil
	s.count = 0
	s.total.Store(0)
}

// publish makes total the count of holds, for readers without the gate.
func (s *holdSet) publish() { s.total.Store(s.count) }
