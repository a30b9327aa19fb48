//go:build linux

package server

import (
	"cmp"
	"slices"
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
// lease presented with another key, and to release at the end.
type ledger struct {
	writes holdSet // count 1 per reservation
	reads  holdSet // read locks per (key, lease)
}

func newLedger() *ledger { return &ledger{} }

func (l *ledger) ownsWrite(k *l1.ObjectKey, lease l1.Lease) bool { return l.writes.held(k, lease) > 0 }
func (l *ledger) dropWrite(lease l1.Lease)                       { l.writes.drop(lease) }
func (l *ledger) heldReads(k *l1.ObjectKey, lease l1.Lease) int64 {
	return l.reads.held(k, lease)
}
func (l *ledger) subRead(lease l1.Lease, locks int) { l.reads.sub(lease, int64(locks)) }
func (l *ledger) dropRead(lease l1.Lease)           { l.reads.drop(lease) }

// clear forgets everything, once released.
func (l *ledger) clear() {
	l.writes.clear()
	l.reads.clear()
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
//   - Leases only grow, so a lease above the highest ever added is new to
//     the set and needs no lookup; runs are appended in lease order, so
//     a lookup is a check of the run last found, else a binary search.
//   - A run goes when its last hold does.
//
// Measured against one Go map per ledger (BenchmarkDaemonCycle), it takes
// the ownership bookkeeping of a 5700-key cycle from about a quarter of
// the daemon's time to a few percent.
type holdSet struct {
	runs  []holdRun
	other map[l1.Lease]hold
	max   l1.Lease // the highest lease added
	hint  int      // the run last found
	total atomic.Int64
}

type hold struct {
	key l1.ObjectKey
	n   int64
}

type holdRun struct {
	lo   l1.Lease
	h    []hold // h[i] is lease lo+i; n == 0: not held
	live int    // holds with n > 0
}

// addAll records n holds of each key whose result is OK, under its lease.
func (s *holdSet) addAll(keys []l1.ObjectKey, res []l1.Result, n int64) {
	var lo, hi l1.Lease
	fresh := 0
	old := s.max // leases above it are new to the set
	for i := range res {
		r := &res[i]
		if r.Status != l1.OK {
			continue
		}
		if r.Lease <= old {
			s.addOne(keys[i], r.Lease, n)
			continue
		}
		if fresh == 0 || r.Lease < lo {
			lo = r.Lease
		}
		hi = max(hi, r.Lease)
		fresh++
	}
	if fresh == 0 {
		return
	}
	span := int(hi - lo + 1)
	if span > fresh+fresh/4+8 {
		// Too sparse for a run.
		for i := range res {
			if r := &res[i]; r.Status == l1.OK && r.Lease > old {
				s.addOther(keys[i], r.Lease, n)
			}
		}
		s.max = hi
		return
	}
	run := holdRun{lo: lo, h: make([]hold, span)}
	for i := range res {
		r := &res[i]
		if r.Status != l1.OK || r.Lease <= old {
			continue
		}
		h := &run.h[r.Lease-lo]
		if h.n == 0 {
			h.key = keys[i]
			run.live++
		}
		h.n += n
		s.total.Add(n)
	}
	s.runs = append(s.runs, run)
	s.max = hi
}

// addOne adds n holds of k under a lease the set may know.
func (s *holdSet) addOne(k l1.ObjectKey, lease l1.Lease, n int64) {
	if r, i := s.find(lease); r >= 0 {
		h := &s.runs[r].h[i]
		if h.n == 0 {
			h.key = k
			s.runs[r].live++
		}
		h.n += n
		s.total.Add(n)
		return
	}
	s.addOther(k, lease, n)
}

func (s *holdSet) addOther(k l1.ObjectKey, lease l1.Lease, n int64) {
	if s.other == nil {
		s.other = map[l1.Lease]hold{}
	}
	h := s.other[lease]
	h.key = k
	h.n += n
	s.other[lease] = h
	s.total.Add(n)
	s.max = max(s.max, lease)
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
		if h := &s.runs[r].h[i]; h.n > 0 && h.key == *k {
			return h.n
		}
		return 0
	}
	if h, ok := s.other[lease]; ok && h.key == *k {
		return h.n
	}
	return 0
}

// sub takes n holds back from lease.
func (s *holdSet) sub(lease l1.Lease, n int64) {
	if r, i := s.find(lease); r >= 0 {
		h := &s.runs[r].h[i]
		if h.n == 0 {
			return
		}
		n = min(n, h.n)
		h.n -= n
		s.total.Add(-n)
		if h.n == 0 {
			s.emptied(r, h)
		}
		return
	}
	if h, ok := s.other[lease]; ok {
		n = min(n, h.n)
		h.n -= n
		s.total.Add(-n)
		if h.n == 0 {
			delete(s.other, lease)
		} else {
			s.other[lease] = h
		}
	}
}

// drop forgets every hold under lease.
func (s *holdSet) drop(lease l1.Lease) {
	if r, i := s.find(lease); r >= 0 {
		h := &s.runs[r].h[i]
		if h.n > 0 {
			s.total.Add(-h.n)
			h.n = 0
			s.emptied(r, h)
		}
		return
	}
	if h, ok := s.other[lease]; ok {
		s.total.Add(-h.n)
		delete(s.other, lease)
	}
}

// emptied notes that hold h of run r has no holds left.
func (s *holdSet) emptied(r int, h *hold) {
	h.key = l1.ObjectKey{} // let the key's strings go
	run := &s.runs[r]
	if run.live--; run.live == 0 {
		s.runs = slices.Delete(s.runs, r, r+1)
		s.hint = 0
	}
}

// leaseHold is one entry of a holdSet, for release and Check.
type leaseHold struct {
	lease l1.Lease
	key   l1.ObjectKey
	n     int64
}

// all returns every hold, in lease order.
func (s *holdSet) all() []leaseHold {
	var out []leaseHold
	for _, r := range s.runs {
		for i, h := range r.h {
			if h.n > 0 {
				out = append(out, leaseHold{r.lo + l1.Lease(i), h.key, h.n})
			}
		}
	}
	for lease, h := range s.other {
		out = append(out, leaseHold{lease, h.key, h.n})
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
	s.total.Store(0)
}
