//go:build linux

package server

import (
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Key handles (protocol version 2; PROTOCOL.md, "Version 2: key
// handles"). A version 2 connection's ledger gives each hold a handle
// when it becomes live: a small number, handed back in the answer that
// granted the lock, by which the connection names the hold's key in a
// later call instead of sending the key again. The hold keeps its handle
// and the table records, per handle, the lease and the kind (write or
// read) of its hold, so a call by handle is resolved by checking the
// table's lease against the one presented, then finding the hold by lease
// as any call does: a handle of no live hold, of the other kind, or of
// another lease (a freed handle handed out again) names nothing, and is
// NOT_OWNER. A handle goes back to the table when its hold goes, so the
// table is as large as the holds, which the per-connection limits bound.

// What the table records a handle's hold as.
const (
	handleFree  uint8 = iota // no hold: never handed out, or freed
	handleWrite              // a write reservation
	handleRead               // read locks under one lease
)

// handleTable is one connection's handles: recs[h-1] is handle h (0 is
// never a handle), free the handles freed, handed out again last freed
// first. Touched by the connection's goroutine only, under the gate.
type handleTable struct {
	on   atomic.Bool // set by a version 2 hello
	recs []handleRec
	free []uint32
}

type handleRec struct {
	lease l1.Lease
	kind  uint8
}

// alloc hands out a handle for a hold of kind under lease: 0 when t is nil
// or not on (a version 1 connection).
func (t *handleTable) alloc(lease l1.Lease, kind uint8) uint32 {
	if t == nil || !t.on.Load() {
		return 0
	}
	if n := len(t.free); n > 0 {
		h := t.free[n-1]
		t.free = t.free[:n-1]
		t.recs[h-1] = handleRec{lease, kind}
		return h
	}
	t.recs = append(t.recs, handleRec{lease, kind})
	return uint32(len(t.recs))
}

// release takes handle h back; 0, and a nil t, are nothing.
func (t *handleTable) release(h uint32) {
	if t == nil || h == 0 {
		return
	}
	t.recs[h-1] = handleRec{}
	t.free = append(t.free, h)
}

// names reports whether h is a live handle of a hold of kind under lease.
func (t *handleTable) names(h uint32, lease l1.Lease, kind uint8) bool {
	if t == nil || h == 0 || uint64(h) > uint64(len(t.recs)) {
		return false
	}
	r := &t.recs[h-1]
	return r.kind == kind && r.kind != handleFree && r.lease == lease
}

// live returns the handles held, for Check.
func (t *handleTable) live() int {
	if t == nil {
		return 0
	}
	return len(t.recs) - len(t.free)
}

// resolve finds the hold handle h names under *lease: its key, written
// into *k, and its count; 0 when h names no live hold of the set's kind
// under that lease. (The bite, anyLease, rewrites *lease to the lease of
// whatever hold h names.) The key's chunk hash aliases the run's bytes, which stay as
// they are until a later grant to this set reuses an emptied run's: the
// caller uses the key within the request (l1 keeps no key of a finishing
// call or a delete; the L2 queue copies what it keeps).
func (s *holdSet) resolve(h uint32, leaseIn *l1.Lease, k *l1.ObjectKey) int64 {
	lease := *leaseIn
	if s.anyLease && s.tab != nil && h != 0 && uint64(h) <= uint64(len(s.tab.recs)) && s.tab.recs[h-1].kind == s.kind {
		lease = s.tab.recs[h-1].lease // the bite: whatever hold the handle now names
		*leaseIn = lease
	} else if !s.tab.names(h, lease, s.kind) {
		return 0
	}
	if r, i := s.find(lease); r >= 0 {
		run := &s.runs[r]
		if hd := &run.h[i]; hd.n > 0 && hd.handle == h {
			run.keyInto(hd, k)
			return hd.n
		}
	}
	if o, ok := s.other[lease]; ok && o.handle == h {
		*k = o.key
		return o.n
	}
	return 0
}

// keyInto writes hold h's key into *k, its chunk hash aliasing the run's
// bytes; a field already holding the same string is not stored again, so
// a steady cycle, whose runs reuse the same bytes, stores almost nothing.
func (r *holdRun) keyInto(h *hold, k *l1.ObjectKey) {
	var hash string
	if h.hlen > 0 {
		hash = unsafe.String(&r.hashes[h.off], int(h.hlen))
	}
	setKeyString(&k.ChunkHash, hash)
	setKeyString(&k.Model, r.strs[h.model])
	setKeyString(&k.CacheSalt, r.strs[h.salt])
	k.KVRank, k.GroupID = h.rank, h.group
}

// setKeyString stores s in *dst unless it is already the same string.
func setKeyString(dst *string, s string) {
	if len(*dst) != len(s) || unsafe.StringData(*dst) != unsafe.StringData(s) {
		*dst = s
	}
}

// resolveHandles makes a call by handle the call by key it stands for:
// q.Keys gets, per handle, the key of the hold it names under its lease
// (a write hold for the finishing writes, a read hold for finish_read,
// either for delete), and handles that name none are marked (notOwned),
// to be answered NOT_OWNER and kept from l1 whatever their slot of q.Keys
// holds. The rest of the call is the call by key's, ownership checks
// included.
func (c *conn) resolveHandles(q *wire.Request) {
	n := len(q.Handles)
	keys := c.hkeys
	if cap(keys) < n {
		keys = make([]l1.ObjectKey, n)
	}
	keys = keys[:n]
	c.hbad = c.hbad[:0]
	w, r := &c.own.writes, &c.own.reads
	for i := range n {
		h, lease, k := q.Handles[i], &q.Leases[i], &keys[i]
		var held int64
		switch q.Type {
		case wire.TypeFinishRead:
			held = r.resolve(h, lease, k)
		case wire.TypeDelete:
			if held = w.resolve(h, lease, k); held == 0 {
				held = r.resolve(h, lease, k)
			}
		default:
			held = w.resolve(h, lease, k)
		}
		if held == 0 {
			if len(c.hbad) == 0 {
				c.hbad = slices.Grow(c.hbad, n)[:n]
				clear(c.hbad)
			}
			c.hbad[i] = true
		}
	}
	c.hkeys, q.Keys = keys, keys
}

// notOwned reports whether key i of q is a handle that named nothing.
func (c *conn) notOwned(q *wire.Request, i int) bool {
	return len(c.hbad) > 0 && q.ByHandles() && c.hbad[i]
}

// grantHandles records a grant's holds in set and, on a version 2
// connection, returns the handle of each result's hold (0 for a result
// that is not OK); nil on a version 1 connection.
func (c *conn) grantHandles(set *holdSet, keys []l1.ObjectKey, res []l1.Result, n int64) []uint32 {
	if c.version < wire.Version2 {
		set.addAll(keys, res, n)
		return nil
	}
	out := slices.Grow(c.hout[:0], len(res))[:len(res)]
	set.addAllHandles(keys, res, n, out)
	c.hout = out
	return out
}

// checkHandles verifies, for Verify, that the table and the holds agree:
// on a version 2 connection every hold has a handle that names it (its
// lease, its kind) and no other, and the table holds no handle without a
// hold; on a version 1 connection no hold has one.
func (l *ledger) checkHandles() error {
	t := l.handles
	if t != nil && !t.on.Load() {
		t = nil
	}
	seen := map[uint32]bool{}
	for _, set := range []*holdSet{&l.writes, &l.reads} {
		for _, h := range set.all() {
			switch {
			case t == nil && h.handle != 0:
				return fmt.Errorf("a version 1 hold (lease %d) has handle %d", h.lease, h.handle)
			case t == nil:
				continue
			case !t.names(h.handle, h.lease, set.kind):
				return fmt.Errorf("the hold of lease %d has handle %d, which does not name it", h.lease, h.handle)
			case seen[h.handle]:
				return fmt.Errorf("handle %d names two holds", h.handle)
			}
			seen[h.handle] = true
		}
	}
	if t != nil && t.live() != len(seen) {
		return fmt.Errorf("%d handles live for %d holds", t.live(), len(seen))
	}
	return nil
}
