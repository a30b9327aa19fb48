package allocator

import "fmt"

// Verify checks every internal invariant and returns the first violation,
// or nil. It costs O(capacity/align + F log F) and is meant for tests,
// fuzzing and debugging, like bbolt's Check: production code never needs
// it. The invariants:
//
//   - free extents are in range, non-empty, pairwise disjoint and never
//     adjacent (coalescing is immediate);
//   - both address maps and the size treap index exactly the same extents,
//     and the treap is ordered by (size, start) and heap-ordered by priority;
//   - every unit is either in exactly one free extent or in exactly one live
//     block, and live blocks are delimited by the start and end bitmaps;
//   - used + free = capacity, and the cached counts (free and used units,
//     live blocks, largest extent) equal the recomputed ones.
func (a *Allocator) Verify() error {
	a.mu.Lock()
	defer a.mu.Unlock()
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
	free := newBitmap(a.units)
	var freeUnits, largest int64
	type entry struct {
		start int64
		id    int32
	}
	var entries []entry
	x.byStart.each(func(k int64, v int32) { entries = append(entries, entry{k, v}) })
	for _, en := range entries {
		start, id := en.start, en.id
		e := x.nodes[id]
		if e.start != start || e.size <= 0 || e.start < 0 || e.start+e.size > a.units {
			return fmt.Errorf("extent %d: bad node %+v for start %d", id, e, start)
		}
		if back, _ := x.byEnd.get(e.start + e.size); back != id {
			return fmt.Errorf("extent [%d,%d): byEnd does not point back", e.start, e.start+e.size)
		}
		if _, adj := x.byEnd.get(e.start); adj {
			return fmt.Errorf("extent [%d,%d): adjacent free extent on the left", e.start, e.start+e.size)
		}
		for u := e.start; u < e.start+e.size; u++ {
			if free.get(u) {
				return fmt.Errorf("unit %d in two free extents", u)
			}
			free.set(u)
			if a.starts.get(u) || a.ends.get(u) {
				return fmt.Errorf("unit %d is free and marked live", u)
			}
		}
		freeUnits += e.size
		largest = max(largest, e.size)
	}
	unready, err := a.unreadyUnitsLocked(free)
	if err != nil {
		return err
	}
	// Walk the live blocks: every non-free unit belongs to the block that
	// starts at the nearest start bit and ends at the next end bit.
	var usedUnits, blocks int64
	for u := int64(0); u < a.units; {
		if free.get(u) {
			u++
			continue
		}
		if !a.starts.get(u) {
			return fmt.Errorf("unit %d is neither free nor the start of a live block", u)
		}
		e := u
		for e < a.units && !a.ends.get(e) {
			if e > u && (a.starts.get(e) || free.get(e)) {
				return fmt.Errorf("live block at unit %d has no end bit", u)
			}
			e++
		}
		if e == a.units {
			return fmt.Errorf("live block at unit %d runs past the end", u)
		}
		usedUnits += e - u + 1
		blocks++
		u = e + 1
	}
	switch {
	case freeUnits != a.freeUnits:
		return fmt.Errorf("free units: counted %d, cached %d", freeUnits, a.freeUnits)
	case usedUnits != a.usedUnits:
		return fmt.Errorf("used units: counted %d, cached %d", usedUnits, a.usedUnits)
	case usedUnits+freeUnits+unready != a.units:
		return fmt.Errorf("used %d + free %d + not ready %d != capacity %d units", usedUnits, freeUnits, unready, a.units)
	case blocks != a.liveBlocks:
		return fmt.Errorf("live blocks: counted %d, cached %d", blocks, a.liveBlocks)
	case largest != a.largestUnits:
		return fmt.Errorf("largest free extent: counted %d units, cached %d", largest, a.largestUnits)
	case a.starts.count() != blocks || a.ends.count() != blocks:
		return fmt.Errorf("bitmaps mark %d starts and %d ends for %d blocks", a.starts.count(), a.ends.count(), blocks)
	}
	return a.ends.verify()
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
