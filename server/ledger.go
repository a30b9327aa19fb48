//go:build linux

package server

import (
	"sync/atomic"

	"github.com/kvalloc/kvalloc/l1"
)

// ledger is what one connection owns: its write reservations and its read
// holds, each under the lease l1 handed out. It is touched only by the
// connection's goroutine, under the server's gate (shared), and read by
// Check under the gate (exclusive); the two counts are atomics for the
// metrics, which read them without the gate.
//
// Leases are unique per manager, so a write lease names one reservation
// and a read lease one (object, read epoch); the key is kept to refuse a
// lease presented with another key, and to release at the end.
type ledger struct {
	writes map[l1.Lease]l1.ObjectKey
	reads  map[l1.Lease]readHold

	nwrites, nreads atomic.Int64 // reservations, and read locks, held
}

// readHold is one connection's read locks on one object under one lease.
type readHold struct {
	key   l1.ObjectKey
	locks int64
}

func newLedger() *ledger {
	return &ledger{writes: map[l1.Lease]l1.ObjectKey{}, reads: map[l1.Lease]readHold{}}
}

// addWrite records a write reservation.
func (l *ledger) addWrite(k l1.ObjectKey, lease l1.Lease) {
	l.writes[lease] = k
	l.nwrites.Add(1)
}

// ownsWrite reports whether the connection holds a write reservation of k
// under lease.
func (l *ledger) ownsWrite(k *l1.ObjectKey, lease l1.Lease) bool {
	w, ok := l.writes[lease]
	return ok && w == *k
}

// dropWrite forgets a reservation, once l1 has answered for it.
func (l *ledger) dropWrite(lease l1.Lease) {
	if _, ok := l.writes[lease]; ok {
		delete(l.writes, lease)
		l.nwrites.Add(-1)
	}
}

// addRead records locks read locks on k under lease.
func (l *ledger) addRead(k l1.ObjectKey, lease l1.Lease, locks int) {
	h := l.reads[lease]
	h.key = k
	h.locks += int64(locks)
	l.reads[lease] = h
	l.nreads.Add(int64(locks))
}

// heldReads returns the read locks the connection holds on k under lease.
func (l *ledger) heldReads(k *l1.ObjectKey, lease l1.Lease) int64 {
	h, ok := l.reads[lease]
	if !ok || h.key != *k {
		return 0
	}
	return h.locks
}

// subRead takes locks back after an OK finish_read.
func (l *ledger) subRead(lease l1.Lease, locks int) {
	h, ok := l.reads[lease]
	if !ok {
		return
	}
	n := min(int64(locks), h.locks)
	h.locks -= n
	l.nreads.Add(-n)
	if h.locks == 0 {
		delete(l.reads, lease)
	} else {
		l.reads[lease] = h
	}
}

// dropRead forgets every hold under lease: l1 no longer honours it.
func (l *ledger) dropRead(lease l1.Lease) {
	if h, ok := l.reads[lease]; ok {
		delete(l.reads, lease)
		l.nreads.Add(-h.locks)
	}
}

// clear forgets everything, once released.
func (l *ledger) clear() {
	clear(l.writes)
	clear(l.reads)
	l.nwrites.Store(0)
	l.nreads.Store(0)
}
