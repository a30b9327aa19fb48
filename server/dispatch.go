//go:build linux

package server

import (
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// dispatch carries out one request of the connection, under the gate
// (shared): one l1 call, and the ledger's record of what it granted or
// gave back. It fills a's per-key outcomes, in request order, or returns
// the l1 error that refused the whole call (nothing changed then).
func (c *conn) dispatch(q *wire.Request, a *wire.Answer) error {
	m := c.s.mgr
	switch q.Type {
	case wire.TypePing:
		return nil
	case wire.TypeStats:
		a.Stats = c.s.Stats()
		return nil
	case wire.TypeReserveWrite:
		res, err := m.AppendReserveWriteChain(c.l1res[:0], q.Keys, q.Positions, q.Temporary, q.Size, q.Mode)
		if err != nil {
			return err
		}
		c.l1res = res
		hs := c.grantHandles(&c.own.writes, q.Keys, res, q.Size) // counted in bytes, for ConnWriteBytes
		a.Results = appendResults(a.Results, res, hs)
	case wire.TypeFinishWrite, wire.TypeAbortWrite:
		keys, leases, idx := c.ownedWrites(q)
		for range q.Keys {
			a.Statuses = append(a.Statuses, wire.StatusNotOwner)
		}
		var sts []l1.Status
		var err error
		if q.Type == wire.TypeFinishWrite {
			sts, err = m.FinishWrite(keys, leases)
		} else {
			sts, err = m.AbortWrite(keys, leases)
		}
		if err != nil {
			return err
		}
		for j, st := range sts {
			c.own.dropWrite(leases[j])
			a.Statuses[at(idx, j)] = wire.FromL1(st)
		}
		if q.Type == wire.TypeFinishWrite {
			c.s.l2.finished(keys, sts, nil) // l2.go: queue the copies to L2
		}
	case wire.TypeFinishWriteAndReserveRead:
		keys, leases, idx := c.ownedWrites(q)
		res, err := m.FinishWriteAndReserveRead(keys, leases, int(q.Locks))
		if err != nil {
			return err
		}
		for range q.Keys {
			a.Results = append(a.Results, wire.Result{Status: wire.StatusNotOwner})
		}
		for j, r := range res {
			c.own.dropWrite(leases[j])
			a.Results[at(idx, j)] = wire.Result{Status: wire.FromL1(r.Status), Block: r.Block, Lease: r.Lease}
		}
		if hs := c.grantHandles(&c.own.reads, keys, res, int64(q.Locks)); hs != nil {
			for j, h := range hs {
				a.Results[at(idx, j)].Handle = h
			}
		}
		c.s.l2.finished(keys, nil, res)
	case wire.TypeReserveRead, wire.TypeReserveReadPrefix, wire.TypeReserveReadPrefixWait:
		// reserve_read_prefix_wait waited for the prefetch before the
		// gate (conn.handle, l2wait); here it is reserve_read_prefix.
		var res []l1.Result
		var err error
		if q.Type == wire.TypeReserveRead {
			res, err = m.AppendReserveRead(c.l1res[:0], q.Keys, int(q.Locks))
			if err == nil {
				c.l1res = res
			}
		} else {
			var n int
			if len(q.Sizes) > 0 {
				res, n, err = c.s.readPrefixSized(q.Keys, q.Sizes, int(q.Locks)) // l2read.go
			} else {
				res, n, err = m.ReserveReadPrefix(q.Keys, int(q.Locks))
			}
			a.Prefix = uint32(n)
		}
		if err != nil {
			return err
		}
		hs := c.grantHandles(&c.own.reads, q.Keys, res, int64(q.Locks))
		a.Results = appendResults(a.Results, res, hs)
	case wire.TypeFinishRead:
		return c.finishRead(q, a)
	case wire.TypeDelete:
		keys, idx := q.Keys, []int(nil)
		if len(c.hbad) > 0 && q.ByHandles() {
			// By handle: the handles that named nothing are NOT_OWNER.
			keys, idx = c.passK[:0], c.passI[:0]
			for i := range q.Keys {
				if !c.hbad[i] {
					keys, idx = append(keys, q.Keys[i]), append(idx, i)
				}
			}
			c.passK, c.passI = keys, idx
		}
		sts, err := m.Delete(keys, q.Flags&wire.FlagForce != 0)
		if err != nil {
			return err
		}
		for range q.Keys {
			a.Statuses = append(a.Statuses, wire.StatusNotOwner)
		}
		for j, st := range sts {
			a.Statuses[at(idx, j)] = wire.FromL1(st)
		}
	case wire.TypeTouch:
		return m.Touch(q.Keys)
	default:
		return &wire.Error{Code: wire.CodeInternal, Msg: fmt.Sprintf("%v has no handler", q.Type)}
	}
	return nil
}

// at maps the j-th key passed to l1 back to its place in the request: idx
// nil means every key was passed.
func at(idx []int, j int) int {
	if idx == nil {
		return j
	}
	return idx[j]
}

// appendResults converts l1's results, with their handles when hs is not
// nil (one per result: a version 2 connection).
func appendResults(dst []wire.Result, res []l1.Result, hs []uint32) []wire.Result {
	for i, r := range res {
		w := wire.Result{Status: wire.FromL1(r.Status), Block: r.Block, Lease: r.Lease}
		if hs != nil {
			w.Handle = hs[i]
		}
		dst = append(dst, w)
	}
	return dst
}

// ownedWrites returns the keys of a finishing write call that the
// connection holds under the lease presented, which go to l1, with their
// leases; the others are answered NOT_OWNER. idx maps the passed keys back
// to the request; nil when all passed, the common case, which copies
// nothing.
func (c *conn) ownedWrites(q *wire.Request) ([]l1.ObjectKey, []l1.Lease, []int) {
	if q.ByHandles() && len(c.hbad) == 0 {
		// Every handle named a write hold of this connection under its
		// lease, and the key is the hold's: owned, as ownsWrite would say.
		return q.Keys, q.Leases, nil
	}
	all := true
	for i := range q.Keys {
		if c.notOwned(q, i) || !c.own.ownsWrite(&q.Keys[i], q.Leases[i]) {
			all = false
			break
		}
	}
	if all {
		return q.Keys, q.Leases, nil
	}
	keys, leases, idx := c.passK[:0], c.passL[:0], c.passI[:0]
	for i := range q.Keys {
		if !c.notOwned(q, i) && c.own.ownsWrite(&q.Keys[i], q.Leases[i]) {
			keys, leases, idx = append(keys, q.Keys[i]), append(leases, q.Leases[i]), append(idx, i)
		}
	}
	c.passK, c.passL, c.passI = keys, leases, idx
	return keys, leases, idx
}

// finishRead releases read locks the connection holds. Each key, in
// request order, is checked against what the connection still holds under
// its lease: none is NOT_OWNER, fewer than asked is OVER_RELEASE, and
// neither goes to l1. The others are taken off the ledger before the call
// (so a key repeated in the call is checked against what its earlier
// occurrences left) and go to l1 in one FinishRead; a lease l1 no longer
// honours drops whatever the connection still held under it.
func (c *conn) finishRead(q *wire.Request, a *wire.Answer) error {
	m := c.s.mgr
	locks := int(q.Locks)
	if locks < 1 || locks > l1.MaxReadLocks {
		_, err := m.FinishRead(nil, nil, locks) // l1's own refusal
		return err
	}
	// While every key passes (the common case) the request's own slices
	// go to l1 and nothing is copied; from the first refusal on, the
	// passing keys are copied out.
	var keys []l1.ObjectKey
	var leases []l1.Lease
	var idx []int
	all := true
	for i := range q.Keys {
		var held int64
		if !c.notOwned(q, i) {
			held = c.own.heldReads(&q.Keys[i], q.Leases[i])
		}
		st := wire.StatusOK
		switch {
		case held == 0:
			st = wire.StatusNotOwner
		case held < int64(locks):
			st = wire.StatusOverRelease
		}
		a.Statuses = append(a.Statuses, st)
		if st != wire.StatusOK {
			if all {
				all = false
				keys, leases, idx = append(c.passK[:0], q.Keys[:i]...), append(c.passL[:0], q.Leases[:i]...), c.passI[:0]
				for j := range i {
					idx = append(idx, j)
				}
			}
			continue
		}
		c.own.subRead(q.Leases[i], locks)
		if !all {
			keys, leases, idx = append(keys, q.Keys[i]), append(leases, q.Leases[i]), append(idx, i)
		}
	}
	if all {
		keys, leases = q.Keys, q.Leases
	} else {
		c.passK, c.passL, c.passI = keys, leases, idx
	}
	sts, err := m.FinishRead(keys, leases, locks)
	if err != nil {
		// Only ErrClosed gets here (the arguments were checked): the
		// daemon is going down and the ledger goes with it.
		return err
	}
	for j, st := range sts {
		if st != l1.OK {
			c.own.dropRead(leases[j])
		}
		a.Statuses[at(idx, j)] = wire.FromL1(st)
	}
	return nil
}
