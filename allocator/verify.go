package allocator

import (
	"cmp"
	"fmt"
	"slices"
)

// Verify checks every internal invariant and returns the first violation,
// or nil. It costs O((L + F) log(L + F)) in the numbers L of live blocks and
// F of free extents, and is meant for tests, fuzzing and debugging, like
// bbolt's Check: production code never needs it. Built with -tags
// invariants, the allocator runs it after every call that changes it and
// panics at that call on a violation. The invariants:
//
//   - free extents are in range, non-empty and never adjacent (coalescing
//     is immediate);
//   - both address maps and the size treap index exactly the same extents,
//     and the treap is ordered by (size, start) and heap-ordered by priority;
//   - every live block is in range and found by a lookup of its first unit,
//     and its generation is at most the last one handed out;
//   - free extents and live blocks tile the capacity: every unit lies in
//     exactly one of them;
//   - the cached counts (free and used units, live blocks, largest extent)
//     equal the recomputed ones, and the cached largest extent is the
//     treap's rightmost node.
func (a *Allocator) Verify() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.verifyLocked()
}

// verifyLocked is Verify under the lock.
func (a *Allocator) verifyLocked() error {
	if a.mem == nil {
		return nil
	}
	x := &a.free
	if x.byStart.n != x.byEnd.n {
		return fmt.Errorf("byStart has %d extents, byEnd %d", x.byStart.n, x.byEnd.n)
	}
	inTree := 0
	if err := a.verifyTreap(x.root, 0, 0, &inTree); err != nil {
		return err
	}
	if inTree != x.byStart.n {
		return fmt.Errorf("treap has %d extents, address maps %d", inTree, x.byStart.n)
	}
	if r := x.rightmost(); x.maxID != r {
		return fmt.Errorf("cached largest extent is node %d, the treap's rightmost is %d", x.maxID, r)
	}
	// piece is a free extent or a live block, in units.
	type piece struct {
		start, size   int64
		live, unready bool
	}
	pieces := make([]piece, 0, x.byStart.n+a.live.n)
	var freeUnits, largest int64
	var bad error
	x.byStart.each(func(start int64, id int32) {
		e := x.nodes[id]
		switch {
		case bad != nil:
		case e.start != start || e.size <= 0 || e.start < 0 || e.start+e.size > a.units:
			bad = fmt.Errorf("extent %d: bad node %+v for start %d", id, e, start)
		default:
			if back, _ := x.byEnd.get(e.start + e.size); back != id {
				bad = fmt.Errorf("extent [%d,%d): byEnd does not point back", e.start, e.start+e.size)
			}
		}
		pieces = append(pieces, piece{start: e.start, size: e.size})
		freeUnits += e.size
		largest = max(largest, e.size)
	})
	if bad != nil {
		return bad
	}
	// Units not ready yet (a growing region) are a third kind of piece.
	unready, err := a.unreadyRangesLocked()
	if err != nil {
		return err
	}
	var unreadyUnits int64
	for _, r := range unready {
		pieces = append(pieces, piece{start: r[0], size: r[1] - r[0], unready: true})
		unreadyUnits += r[1] - r[0]
	}
	var usedUnits, blocks int64
	a.live.each(func(u, size int64, gen uint64) {
		switch {
		case bad != nil:
		case u < 0 || size <= 0 || u+size > a.units:
			bad = fmt.Errorf("live block at unit %d of %d units is out of range", u, size)
		case a.live.find(u) < 0:
			bad = fmt.Errorf("live block at unit %d is not found by a lookup", u)
		case gen == 0 || gen > a.gen:
			bad = fmt.Errorf("live block at unit %d has generation %d, last handed out %d", u, gen, a.gen)
		}
		pieces = append(pieces, piece{start: u, size: size, live: true})
		usedUnits += size
		blocks++
	})
	if bad != nil {
		return bad
	}
	slices.SortFunc(pieces, func(p, q piece) int { return cmp.Compare(p.start, q.start) })
	next := int64(0)
	for i, p := range pieces {
		switch {
		case p.start < next:
			return fmt.Errorf("unit %d is in two pieces (live=%v at %d overlaps the one before)", p.start, p.live, p.start)
		case p.start > next:
			return fmt.Errorf("units [%d,%d) are neither free nor live", next, p.start)
		case !p.live && !p.unready && i > 0 && !pieces[i-1].live && !pieces[i-1].unready:
			return fmt.Errorf("extent at unit %d: adjacent free extent on the left", p.start)
		}
		next = p.start + p.size
	}
	switch {
	case next != a.units:
		return fmt.Errorf("units [%d,%d) are neither free nor live", next, a.units)
	case a.live.n != int(blocks):
		return fmt.Errorf("live table counts %d blocks, holds %d", a.live.n, blocks)
	case 4*a.live.n > 3*len(a.live.slots):
		return fmt.Errorf("live table has %d blocks in %d slots, above its load factor", a.live.n, len(a.live.slots))
	case freeUnits != a.freeUnits:
		return fmt.Errorf("free units: counted %d, cached %d", freeUnits, a.freeUnits)
	case usedUnits != a.usedUnits:
		return fmt.Errorf("used units: counted %d, cached %d", usedUnits, a.usedUnits)
	case usedUnits+freeUnits+unreadyUnits != a.units:
		return fmt.Errorf("used %d + free %d + not ready %d != capacity %d units", usedUnits, freeUnits, unreadyUnits, a.units)
	case blocks != a.liveBlocks:
		return fmt.Errorf("live blocks: counted %d, cached %d", blocks, a.liveBlocks)
	case largest != a.largestUnits:
		return fmt.Errorf("largest free extent: counted %d units, cached %d", largest, a.largestUnits)
	}
	return nil
}

// verifyTreap checks the subtree at t: every key lies strictly between the
// keys of nodes lo and hi (0 means unbounded), and no child outranks its
// parent.
func (a *Allocator) verifyTreap(t, lo, hi int32, count *int) error {
	if t == 0 {
		return nil
	}
	*count++
	if *count > len(a.free.nodes) {
		return fmt.Errorf("treap has a cycle")
	}
	n := a.free.nodes[t]
	if lo != 0 && !a.free.less(lo, t) || hi != 0 && !a.free.less(t, hi) {
		return fmt.Errorf("treap node %d (size %d, start %d) out of (size, start) order", t, n.size, n.start)
	}
	for _, c := range []int32{n.left, n.right} {
		if c != 0 && a.free.nodes[c].prio > n.prio {
			return fmt.Errorf("treap node %d: child %d has higher priority", t, c)
		}
	}
	if err := a.verifyTreap(n.left, lo, t, count); err != nil {
		return err
	}
	return a.verifyTreap(n.right, t, hi, count)
}
