//go:build linux

package client

import (
	"cmp"
	"slices"
	"unsafe"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Key handles (protocol version 2, wire/PROTOCOL.md "Version 2: key
// handles"). On a version 2 connection the daemon answers every lock it
// grants with a handle that names the lock's record in the connection's
// ledger, and the finishing calls may name their keys by handle, which
// spares the daemon the keys' decoding and comparison and the socket
// their bytes. The public calls are those of version 1: a caller presents
// keys and leases. So the Client keeps the daemon's ledger as the
// answers tell it (book): per lease the handle, the key it was granted
// for, and the holds under it, taken and dropped by exactly the rules the
// daemon's ledger follows. A finishing call then sends, per key, the
// handle its lease names when the book holds the lease with that very
// key, and handle 0 otherwise, which the daemon answers NOT_OWNER, as it
// would answer the key by version 1's rules: a lease this connection does
// not hold, or holds under another key. So every answer is the one
// version 1 gives.

// book is a version 2 connection's copy of its ledger. ents[h-1] is handle
// h's hold; writes and reads map leases to handles, as the daemon's two
// sets do.
type book struct {
	ents          []bookEnt
	writes, reads leaseIndex
	// anyKey is a deliberate bug, set only by the handle tests' bite
	// (export_test.go): handle names a lease's handle whatever key the
	// caller presents with it.
	anyKey bool
}

// bookEnt is one hold: the key as the caller named it in the call that
// granted it (the caller's strings, compared by address first), its lease
// and its holds (1 for a write; read locks for a read); n 0 is a free
// handle.
type bookEnt struct {
	key   l1.ObjectKey
	lease l1.Lease
	n     int64
}

// leaseIndex maps leases to handles. A grant's new leases are
// consecutive (the daemon's l1 hands out one call's from one counter), so
// they are kept as runs, a slice indexed by lease minus its first, as the
// daemon's ledger does; others (an old read lease, a sparse grant) go to
// a map.
type leaseIndex struct {
	runs  []leaseRun
	other map[l1.Lease]uint32
	max   l1.Lease
	hint  int
	spare []uint32
}

type leaseRun struct {
	lo   l1.Lease
	hs   []uint32 // hs[i] is lease lo+i's handle; 0: none
	live int
}

// find returns the handle of lease, or 0.
func (x *leaseIndex) find(lease l1.Lease) uint32 {
	if r, i := x.slot(lease); r >= 0 {
		if h := x.runs[r].hs[i]; h != 0 {
			return h
		}
	}
	return x.other[lease]
}

// slot returns the run and index of lease, or -1.
func (x *leaseIndex) slot(lease l1.Lease) (int, int) {
	if lease > x.max || len(x.runs) == 0 {
		return -1, 0
	}
	if x.hint < len(x.runs) {
		if r := &x.runs[x.hint]; lease >= r.lo && lease < r.lo+l1.Lease(len(r.hs)) {
			return x.hint, int(lease - r.lo)
		}
	}
	j, found := slices.BinarySearchFunc(x.runs, lease, func(r leaseRun, l l1.Lease) int { return cmp.Compare(r.lo, l) })
	if !found {
		j--
	}
	if j < 0 {
		return -1, 0
	}
	if r := &x.runs[j]; lease < r.lo+l1.Lease(len(r.hs)) {
		x.hint = j
		return j, int(lease - r.lo)
	}
	return -1, 0
}

// remove forgets lease.
func (x *leaseIndex) remove(lease l1.Lease) {
	if r, i := x.slot(lease); r >= 0 {
		run := &x.runs[r]
		if run.hs[i] != 0 {
			run.hs[i] = 0
			if run.live--; run.live == 0 {
				if cap(run.hs) > cap(x.spare) && cap(run.hs) <= 1<<16 {
					x.spare = run.hs
				}
				x.runs = slices.Delete(x.runs, r, r+1)
				x.hint = 0
			}
			return
		}
	}
	delete(x.other, lease)
}

func (x *leaseIndex) putOther(lease l1.Lease, h uint32) {
	if x.other == nil {
		x.other = map[l1.Lease]uint32{}
	}
	x.other[lease] = h
	x.max = max(x.max, lease)
}

// grant records an answer's grants: n holds (1 for a write, the locks
// for a read) of keys[i] under res[i]'s lease and handle, for each OK
// result, in index x. A handle the book holds already (a read lease the
// connection holds locks under) adds to its holds.
func (b *book) grant(x *leaseIndex, keys []l1.ObjectKey, res []wire.Result, n int64) {
	var lo, hi l1.Lease
	fresh := 0
	old := x.max
	for i := range res {
		r := &res[i]
		if r.Status != wire.StatusOK || r.Handle == 0 {
			continue
		}
		b.take(r.Handle, &keys[i], r.Lease, n)
		if r.Lease <= old {
			if x.find(r.Lease) != r.Handle {
				x.putOther(r.Lease, r.Handle)
			}
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
		for i := range res {
			if r := &res[i]; r.Status == wire.StatusOK && r.Handle != 0 && r.Lease > old {
				x.putOther(r.Lease, r.Handle)
			}
		}
		x.max = hi
		return
	}
	run := leaseRun{lo: lo}
	if cap(x.spare) >= span {
		run.hs, x.spare = x.spare[:span], nil
		clear(run.hs)
	} else {
		run.hs = make([]uint32, span)
	}
	for i := range res {
		if r := &res[i]; r.Status == wire.StatusOK && r.Handle != 0 && r.Lease > old {
			if run.hs[r.Lease-lo] == 0 {
				run.live++
			}
			run.hs[r.Lease-lo] = r.Handle
		}
	}
	x.runs = append(x.runs, run)
	x.max = hi
}

// take adds n holds under handle h, granted for key under lease.
func (b *book) take(h uint32, key *l1.ObjectKey, lease l1.Lease, n int64) {
	if int(h) > len(b.ents) {
		b.ents = slices.Grow(b.ents, int(h)-len(b.ents))[:h]
	}
	e := &b.ents[h-1]
	if e.n > 0 && e.lease == lease {
		e.n += n
		return
	}
	e.key, e.lease, e.n = *key, lease, n
}

// handle returns the handle of the hold under lease in x that key names,
// or 0 when the book holds none (the daemon would answer the key
// NOT_OWNER).
func (b *book) handle(x *leaseIndex, key *l1.ObjectKey, lease l1.Lease) uint32 {
	h := x.find(lease)
	if h == 0 || int(h) > len(b.ents) {
		return 0
	}
	if e := &b.ents[h-1]; e.n > 0 && e.lease == lease && (b.anyKey || sameKey(&e.key, key)) {
		return h
	}
	return 0
}

// sub takes n holds back from handle h's hold (all of them when n < 0),
// freeing the handle with its last.
func (b *book) sub(x *leaseIndex, h uint32, n int64) {
	e := &b.ents[h-1]
	if n >= 0 && e.n > n {
		e.n -= n
		return
	}
	x.remove(e.lease)
	*e = bookEnt{}
}

// sameKey reports whether a and b are the same key, deciding at once when
// their strings are the same bytes at the same address (a caller that
// finishes the keys it reserved).
func sameKey(a, b *l1.ObjectKey) bool {
	return a.KVRank == b.KVRank && a.GroupID == b.GroupID &&
		sameString(a.ChunkHash, b.ChunkHash) && sameString(a.Model, b.Model) && sameString(a.CacheSalt, b.CacheSalt)
}

func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// byHandle makes c.req, a finishing call of keys under leases (the wire's
// ids), one by handle when the connection speaks version 2: each key's
// handle from the book, 0 for one it does not hold. It records in
// c.sent the handle sent per key, for forget.
func (c *Client) byHandle(x *leaseIndex, keys []l1.ObjectKey, leases []l1.Lease) {
	if c.book == nil {
		return
	}
	q := &c.req
	hs := slices.Grow(c.handles[:0], len(keys))[:len(keys)]
	for i := range keys {
		hs[i] = c.book.handle(x, &keys[i], leases[i])
	}
	c.handles = hs
	q.Keys, q.Handles, q.Flags = nil, hs, q.Flags|wire.FlagHandles
}

// settle updates the book after a finishing call by handle: per key, a
// status other than NOT_OWNER (and OVER_LIMIT, OVER_RELEASE, which change
// nothing) dropped the daemon's record, or for finish_read with OK
// released locks of it.
func (c *Client) settle(x *leaseIndex, sts []wire.Status, locks int) {
	if c.book == nil {
		return
	}
	for i, h := range c.req.Handles {
		if h == 0 || c.book.ents[h-1].n == 0 {
			continue
		}
		switch st := sts[i]; {
		case st == wire.StatusNotOwner || st == wire.StatusOverLimit || st == wire.StatusOverRelease:
		case st == wire.StatusOK && locks > 0:
			c.book.sub(x, h, int64(locks))
		default:
			c.book.sub(x, h, -1)
		}
	}
}
