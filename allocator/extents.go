package allocator

// The free-extent index.
//
// Every free extent is one node in a pool (a slice, so the index holds no
// pointers and costs the garbage collector nothing to scan). A node is
// reachable two ways:
//
//   - by address: byStart maps an extent's first unit to its node and byEnd
//     maps the unit one past its last unit to its node (addrtable.go).
//     Freeing a block finds both neighbours with at most two O(1) lookups,
//     so coalescing is immediate and free extents are never adjacent.
//   - by size: a treap ordered by (size, start). Best fit is a lower-bound
//     search, the largest extent is the rightmost node, and "how many objects
//     of size s fit" walks the extents of at least s units from the largest
//     down. Every update is O(log F) expected in the number F of free
//     extents; priorities come from a fixed-seed generator, so the shape,
//     and with it every placement decision, is deterministic.

type extent struct {
	start, size int64 // in alignment units
	left, right int32 // treap children; 0 is nil
	prio        uint32
}

type extentIndex struct {
	nodes   []extent // nodes[0] is the nil sentinel
	spare   []int32  // released node ids, reused before nodes grows
	root    int32
	maxID   int32 // the largest extent, kept so Stats stays O(1)
	byStart addrTable
	byEnd   addrTable
	rng     uint64
}

func newExtentIndex() extentIndex {
	return extentIndex{
		nodes:   make([]extent, 1, 64),
		byStart: newAddrTable(),
		byEnd:   newAddrTable(),
		rng:     0x9E3779B97F4A7C15,
	}
}

func (x *extentIndex) len() int { return x.byStart.n }

func (x *extentIndex) less(a, b int32) bool {
	na, nb := &x.nodes[a], &x.nodes[b]
	return na.size < nb.size || (na.size == nb.size && na.start < nb.start)
}

func (x *extentIndex) nextPrio() uint32 {
	// xorshift64*: deterministic and cheap.
	x.rng ^= x.rng >> 12
	x.rng ^= x.rng << 25
	x.rng ^= x.rng >> 27
	return uint32((x.rng * 2685821657736338717) >> 32)
}

// add inserts a free extent [start, start+size).
func (x *extentIndex) add(start, size int64) {
	var id int32
	if n := len(x.spare); n > 0 {
		id = x.spare[n-1]
		x.spare = x.spare[:n-1]
	} else {
		x.nodes = append(x.nodes, extent{})
		id = int32(len(x.nodes) - 1)
	}
	x.nodes[id] = extent{start: start, size: size, prio: x.nextPrio()}
	x.byStart.put(start, id)
	x.byEnd.put(start+size, id)
	x.root = x.insert(x.root, id)
	if x.maxID == 0 || x.less(x.maxID, id) {
		x.maxID = id
	}
}

// remove deletes extent id from the index.
func (x *extentIndex) remove(id int32) {
	n := &x.nodes[id]
	x.byStart.del(n.start)
	x.byEnd.del(n.start + n.size)
	x.root = x.delete(x.root, id)
	x.spare = append(x.spare, id)
	if id == x.maxID {
		x.maxID = x.rightmost()
	}
}

// shrink moves extent id to [start, start+size), which lies inside the
// extent and is smaller than it: its (size, start) key only decreases. pred
// is id's in-order predecessor (0 when it has none), which the caller knows
// from the bestFit walk that found id, so checking the order costs one
// comparison: when the new key still lies above pred's, as it does when a
// large extent gives up one object, the node is updated in place and the
// largest extent stays the largest. Otherwise the node is deleted and
// reinserted; it keeps its identity and priority, so the treap's shape is
// the one a fresh insert would give.
func (x *extentIndex) shrink(id, pred int32, start, size int64) {
	n := &x.nodes[id]
	if n.start != start {
		x.byStart.rekey(n.start, start, id)
	}
	if end := start + size; n.start+n.size != end {
		x.byEnd.rekey(n.start+n.size, end, id)
	}
	if pred == 0 || keyLess(x.nodes[pred].size, x.nodes[pred].start, size, start) {
		n.start, n.size = start, size
		return
	}
	x.move(id, start, size)
	if id == x.maxID {
		x.maxID = x.rightmost()
	}
}

// raise gives extent id the larger key (size, start), size > its size: a
// merge. Only the treap changes; the caller has moved the extent's entries
// in the address tables. A larger key can only pass the in-order
// successor, so the largest extent stays the largest with no check, and any
// other is checked against its successor, found in its right subtree or,
// failing that, by one walk from the root.
func (x *extentIndex) raise(id int32, start, size int64) {
	if id == x.maxID {
		n := &x.nodes[id]
		n.start, n.size = start, size
	} else {
		x.raiseBelowMax(id, start, size)
	}
}

// raiseBelowMax is raise of an extent other than the largest.
func (x *extentIndex) raiseBelowMax(id int32, start, size int64) {
	n := &x.nodes[id]
	succ := x.successor(id)
	if keyLess(size, start, x.nodes[succ].size, x.nodes[succ].start) {
		n.start, n.size = start, size
		return
	}
	x.move(id, start, size)
	if x.less(x.maxID, id) {
		x.maxID = id
	}
}

// move gives node id the key (size, start) by deleting and reinserting it
// in the treap; the address tables are the caller's.
func (x *extentIndex) move(id int32, start, size int64) {
	x.root = x.delete(x.root, id)
	n := &x.nodes[id]
	n.start, n.size, n.left, n.right = start, size, 0, 0
	x.root = x.insert(x.root, id)
}

func keyLess(sa, a, sb, b int64) bool { return sa < sb || (sa == sb && a < b) }

// successor returns the in-order successor of node id, or 0: the leftmost
// node of its right subtree, or else the last node where a walk from the
// root to id turns left.
func (x *extentIndex) successor(id int32) int32 {
	if t := x.nodes[id].right; t != 0 {
		for x.nodes[t].left != 0 {
			t = x.nodes[t].left
		}
		return t
	}
	succ := int32(0)
	for t := x.root; t != id; {
		if x.less(id, t) {
			succ, t = t, x.nodes[t].left
		} else {
			t = x.nodes[t].right
		}
	}
	return succ
}

func (x *extentIndex) insert(t, id int32) int32 {
	if t == 0 {
		return id
	}
	if x.nodes[id].prio > x.nodes[t].prio {
		l, r := x.split(t, id)
		x.nodes[id].left, x.nodes[id].right = l, r
		return id
	}
	if x.less(id, t) {
		x.nodes[t].left = x.insert(x.nodes[t].left, id)
	} else {
		x.nodes[t].right = x.insert(x.nodes[t].right, id)
	}
	return t
}

// split divides treap t into the nodes ordered before id and the rest.
func (x *extentIndex) split(t, id int32) (l, r int32) {
	if t == 0 {
		return 0, 0
	}
	if x.less(t, id) {
		a, b := x.split(x.nodes[t].right, id)
		x.nodes[t].right = a
		return t, b
	}
	a, b := x.split(x.nodes[t].left, id)
	x.nodes[t].left = b
	return a, t
}

func (x *extentIndex) merge(l, r int32) int32 {
	if l == 0 {
		return r
	}
	if r == 0 {
		return l
	}
	if x.nodes[l].prio > x.nodes[r].prio {
		x.nodes[l].right = x.merge(x.nodes[l].right, r)
		return l
	}
	x.nodes[r].left = x.merge(l, x.nodes[r].left)
	return r
}

func (x *extentIndex) delete(t, id int32) int32 {
	if t == id {
		n := &x.nodes[t]
		return x.merge(n.left, n.right)
	}
	if x.less(id, t) {
		x.nodes[t].left = x.delete(x.nodes[t].left, id)
	} else {
		x.nodes[t].right = x.delete(x.nodes[t].right, id)
	}
	return t
}

// bestFit returns the smallest extent of at least size units, the lowest
// address among equals, or 0 when none is that large, and its in-order
// predecessor, the largest extent smaller than size units (0 when none):
// the last node where the walk turns right.
func (x *extentIndex) bestFit(size int64) (best, pred int32) {
	for t := x.root; t != 0; {
		if x.nodes[t].size >= size {
			best = t
			t = x.nodes[t].left
		} else {
			pred = t
			t = x.nodes[t].right
		}
	}
	return best, pred
}

// largest returns the size in units of the largest free extent, or 0.
func (x *extentIndex) largest() int64 { return x.nodes[x.maxID].size }

// rightmost walks to the largest node, or returns 0 for an empty index.
func (x *extentIndex) rightmost() int32 {
	t := x.root
	for t != 0 && x.nodes[t].right != 0 {
		t = x.nodes[t].right
	}
	return t
}

// slots returns min(limit, Σ⌊size_i/size⌋) over the free extents, visiting
// only extents of at least size units, largest first, and stopping as soon
// as limit is reached.
func (x *extentIndex) slots(size, limit int64) int64 {
	return x.slotsIn(x.root, size, limit, 0)
}

func (x *extentIndex) slotsIn(t int32, size, limit, acc int64) int64 {
	for t != 0 && acc < limit {
		n := &x.nodes[t]
		acc = x.slotsIn(n.right, size, limit, acc)
		if acc >= limit || n.size < size {
			break // everything left of a too-small node is too small
		}
		acc += n.size / size
		t = n.left
	}
	return min(acc, limit)
}
