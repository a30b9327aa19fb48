//go:build linux

package daemoncheck

import (
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/internal/reference/l1ref"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// This file models kvallocd's connections over the manager model
// (package l1ref): each
// connection's ledger of what it owns, the refusals that follow from it,
// and the release when it ends, as plainly as the daemon's rules read
// (wire/PROTOCOL.md, "What a connection owns"):
//
//   - a granted write reservation is the connection's (key, write lease);
//     finish_write, abort_write and finish_write_and_reserve_read pass a key
//     to the manager only with a lease the connection holds for that key,
//     and answer NotOwner otherwise; the record goes once the manager has
//     answered for it, whatever it answered;
//   - a granted read lock adds its count to the connection's (key, read
//     lease); finish_read checks each key in request order against what the
//     connection still holds: none is NotOwner, too few OverRelease; the
//     others are taken off and passed to the manager in one call; a lease
//     the manager no longer honours drops what is left under it;
//   - a disconnect aborts every write reservation the connection holds and
//     releases every read lock, in one call per lock count;
//   - a delete with force, from any connection, drops the keys at once but
//     never takes a block from under a live lock: the manager model holds
//     the block under the lock's lease (l1ref's quarantine) until its
//     holders let go. The ledgers need no rule of their own for it: the
//     holder's finish_write answers WriteDeleted and its finish_read OK,
//     abort_write and the disconnect's release OK, and the record goes as
//     for any answer. System checks that the daemon holds the same blocks
//     (Compare) and grants none of them to a writer (apply).

// The daemon's own statuses, in the l1.Status field of a result as the
// daemon's answer carries them: wire's values, above l1's.
const (
	NotOwner    = l1.Status(wire.StatusNotOwner)
	OverRelease = l1.Status(wire.StatusOverRelease)
)

// errInvalid is the model's answer to bad arguments.
var errInvalid = fmt.Errorf("daemoncheck: %w", l1.ErrInvalidArgument)

func badLocks(locks int) bool { return locks < 1 || locks > l1.MaxReadLocks }

// Owners is the manager model behind a daemon, with one ledger per open
// connection, by connection number.
type Owners[K comparable] struct {
	M     *l1ref.Manager[K]
	conns map[int]*ledger[K]
	l2    *daemonL2[K] // nil: a daemon without L2 (owners_l2.go)
}

type ledger[K comparable] struct {
	writes map[l1.Lease]K
	reads  map[l1.Lease]readHold[K]
}

type readHold[K comparable] struct {
	key   K
	locks int
}

// NewOwners returns the model of a daemon over m, with no connection.
func NewOwners[K comparable](m *l1ref.Manager[K]) *Owners[K] {
	return &Owners[K]{M: m, conns: map[int]*ledger[K]{}}
}

// conn returns connection c's ledger, opening it on first use.
func (o *Owners[K]) conn(c int) *ledger[K] {
	l := o.conns[c]
	if l == nil {
		l = &ledger[K]{writes: map[l1.Lease]K{}, reads: map[l1.Lease]readHold[K]{}}
		o.conns[c] = l
	}
	return l
}

// Holds returns the write reservations and read locks connection c holds.
func (o *Owners[K]) Holds(c int) (writes, reads int) {
	l := o.conn(c)
	for _, h := range l.reads {
		reads += h.locks
	}
	return len(l.writes), reads
}

// ReserveWriteChain reserves for connection c (positions nil: ReserveWrite).
func (o *Owners[K]) ReserveWriteChain(c int, keys []K, positions []uint32, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	var res []l1.Result
	var err error
	if positions == nil {
		res, err = o.M.ReserveWrite(keys, temporary, size, mode)
	} else {
		res, err = o.M.ReserveWriteChain(keys, positions, temporary, size, mode)
	}
	if err == nil {
		l := o.conn(c)
		for i, r := range res {
			if r.Status == l1.OK {
				l.writes[r.Lease] = keys[i]
			}
		}
	}
	return res, err
}

// owned splits a finishing write call: the indices of the keys connection
// c holds under the leases presented.
func (o *Owners[K]) owned(c int, keys []K, leases []l1.Lease) []int {
	l := o.conn(c)
	var idx []int
	for i, k := range keys {
		if w, ok := l.writes[leases[i]]; ok && w == k {
			idx = append(idx, i)
		}
	}
	return idx
}

func pick[T any](xs []T, idx []int) []T {
	out := make([]T, len(idx))
	for j, i := range idx {
		out[j] = xs[i]
	}
	return out
}

// finishWrites runs call (FinishWrite or AbortWrite) for connection c.
func (o *Owners[K]) finishWrites(c int, keys []K, leases []l1.Lease, call func([]K, []l1.Lease) ([]l1.Status, error)) ([]l1.Status, error) {
	if len(leases) != len(keys) {
		return nil, errInvalid
	}
	idx := o.owned(c, keys, leases)
	sts, err := call(pick(keys, idx), pick(leases, idx))
	if err != nil {
		return nil, err
	}
	out := make([]l1.Status, len(keys))
	for i := range out {
		out[i] = NotOwner
	}
	l := o.conn(c)
	for j, i := range idx {
		delete(l.writes, leases[i])
		out[i] = sts[j]
	}
	return out, nil
}

// FinishWrite finishes connection c's writes; with L2, the daemon then
// copies the finished keys (copyToL2).
func (o *Owners[K]) FinishWrite(c int, keys []K, leases []l1.Lease) ([]l1.Status, error) {
	sts, err := o.finishWrites(c, keys, leases, o.M.FinishWrite)
	if err == nil && o.l2 != nil {
		var done []K
		for i, st := range sts {
			if st == l1.OK {
				done = append(done, keys[i])
			}
		}
		o.copyToL2(done)
	}
	return sts, err
}

// AbortWrite aborts connection c's writes.
func (o *Owners[K]) AbortWrite(c int, keys []K, leases []l1.Lease) ([]l1.Status, error) {
	return o.finishWrites(c, keys, leases, o.M.AbortWrite)
}

// FinishWriteAndReserveRead finishes connection c's writes and read-locks
// them for it.
func (o *Owners[K]) FinishWriteAndReserveRead(c int, keys []K, leases []l1.Lease, locks int) ([]l1.Result, error) {
	if len(leases) != len(keys) || badLocks(locks) {
		return nil, errInvalid
	}
	idx := o.owned(c, keys, leases)
	res, err := o.M.FinishWriteAndReserveRead(pick(keys, idx), pick(leases, idx), locks)
	if err != nil {
		return nil, err
	}
	out := make([]l1.Result, len(keys))
	for i := range out {
		out[i].Status = NotOwner
	}
	l := o.conn(c)
	var done []K
	for j, i := range idx {
		delete(l.writes, leases[i])
		if res[j].Status == l1.OK {
			o.addRead(l, keys[i], res[j].Lease, locks)
			done = append(done, keys[i])
		}
		out[i] = res[j]
	}
	o.copyToL2(done)
	return out, nil
}

func (o *Owners[K]) addRead(l *ledger[K], k K, lease l1.Lease, locks int) {
	h := l.reads[lease]
	h.key = k
	h.locks += locks
	l.reads[lease] = h
}

// ReserveRead read-locks for connection c.
func (o *Owners[K]) ReserveRead(c int, keys []K, locks int) ([]l1.Result, error) {
	res, err := o.M.ReserveRead(keys, locks)
	o.recordReads(c, keys, res, err, locks)
	return res, err
}

// ReserveReadPrefix read-locks a prefix for connection c.
func (o *Owners[K]) ReserveReadPrefix(c int, keys []K, locks int) ([]l1.Result, int, error) {
	res, n, err := o.M.ReserveReadPrefix(keys, locks)
	o.recordReads(c, keys, res, err, locks)
	return res, n, err
}

func (o *Owners[K]) recordReads(c int, keys []K, res []l1.Result, err error, locks int) {
	if err != nil {
		return
	}
	l := o.conn(c)
	for i, r := range res {
		if r.Status == l1.OK {
			o.addRead(l, keys[i], r.Lease, locks)
		}
	}
}

// FinishRead releases connection c's read locks.
func (o *Owners[K]) FinishRead(c int, keys []K, leases []l1.Lease, locks int) ([]l1.Status, error) {
	if len(leases) != len(keys) || badLocks(locks) {
		return nil, errInvalid
	}
	l := o.conn(c)
	out := make([]l1.Status, len(keys))
	var idx []int
	for i, k := range keys {
		h, ok := l.reads[leases[i]]
		switch {
		case !ok || h.key != k:
			out[i] = NotOwner
		case h.locks < locks:
			out[i] = OverRelease
		default:
			h.locks -= locks
			if h.locks == 0 {
				delete(l.reads, leases[i])
			} else {
				l.reads[leases[i]] = h
			}
			idx = append(idx, i)
		}
	}
	sts, err := o.M.FinishRead(pick(keys, idx), pick(leases, idx), locks)
	if err != nil {
		return nil, err
	}
	for j, i := range idx {
		if sts[j] != l1.OK {
			delete(l.reads, leases[i])
		}
		out[i] = sts[j]
	}
	return out, nil
}

// Disconnect ends connection c: its write reservations are aborted and its
// read locks released. It returns how many the manager honoured.
func (o *Owners[K]) Disconnect(c int) (writes, reads int) {
	l := o.conn(c)
	delete(o.conns, c)
	// Writes in lease order (the order they were granted), then reads in
	// one call per lock count, counts ascending, each in lease order: the
	// daemon's order, so that recency after a release is determined.
	wl := make([]l1.Lease, 0, len(l.writes))
	for lease := range l.writes {
		wl = append(wl, lease)
	}
	slices.Sort(wl)
	if len(wl) > 0 {
		keys := make([]K, len(wl))
		for i, lease := range wl {
			keys[i] = l.writes[lease]
		}
		sts, _ := o.M.AbortWrite(keys, wl)
		for _, s := range sts {
			if s == l1.OK {
				writes++
			}
		}
	}
	byCount := map[int][]l1.Lease{}
	for lease, h := range l.reads {
		for left := h.locks; left > 0; left -= min(left, l1.MaxReadLocks) {
			n := min(left, l1.MaxReadLocks)
			byCount[n] = append(byCount[n], lease)
		}
	}
	counts := make([]int, 0, len(byCount))
	for n := range byCount {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	for _, n := range counts {
		ls := byCount[n]
		slices.Sort(ls)
		ks := make([]K, len(ls))
		for i, lease := range ls {
			ks[i] = l.reads[lease].key
		}
		sts, _ := o.M.FinishRead(ks, ls, n)
		for _, s := range sts {
			if s == l1.OK {
				reads += n
			}
		}
	}
	return writes, reads
}
