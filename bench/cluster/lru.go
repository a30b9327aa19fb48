//go:build linux

package cluster

// lru is a cache of blocks with exactly cap resident places, a Go map and
// a doubly linked recency list, with bench/trace's ideal LRU's rules: a
// block claimed for writing is in flight (present, not readable, taking
// no place) until it is committed; committing or inserting a block makes
// it most recently used and, when every place is taken, evicts the least
// recently used resident block. A node's l1 and the L2 are each one lru;
// the L2 never holds blocks in flight.
type lru struct {
	cap   int
	index map[int32]int32 // block → node
	nodes []lruNode       // node 0 is the list's sentinel
	free  []int32
	n     int // resident blocks
	// evictions counts the blocks evicted.
	evictions int64
}

type lruNode struct {
	block      int32
	prev, next int32
	inflight   bool
	// dirty marks a block this node computed and has not put to L2 (the
	// write-back policy's victims to put).
	dirty bool
}

// victim is a block evicted by a commit or an insert.
type victim struct {
	block int32
	dirty bool
	ok    bool
}

func newLRU(capacity int64) *lru {
	return &lru{cap: int(capacity), index: make(map[int32]int32), nodes: make([]lruNode, 1, 1024)}
}

func (c *lru) unlink(i int32) {
	nd := &c.nodes[i]
	c.nodes[nd.prev].next = nd.next
	c.nodes[nd.next].prev = nd.prev
}

func (c *lru) pushBack(i int32) {
	tail := c.nodes[0].prev
	c.nodes[i].prev, c.nodes[i].next = tail, 0
	c.nodes[tail].next = i
	c.nodes[0].prev = i
}

// readable reports whether b is resident (not in flight).
func (c *lru) readable(b int32) bool {
	i, ok := c.index[b]
	return ok && !c.nodes[i].inflight
}

// present reports whether b is resident or in flight.
func (c *lru) present(b int32) bool {
	_, ok := c.index[b]
	return ok
}

// touch makes resident block b most recently used.
func (c *lru) touch(b int32) {
	i := c.index[b]
	c.unlink(i)
	c.pushBack(i)
}

// newNode returns a fresh node for b, indexed, not linked.
func (c *lru) newNode(b int32) int32 {
	var i int32
	if n := len(c.free); n > 0 {
		i, c.free = c.free[n-1], c.free[:n-1]
	} else {
		i = int32(len(c.nodes))
		c.nodes = append(c.nodes, lruNode{})
	}
	c.nodes[i] = lruNode{block: b}
	c.index[b] = i
	return i
}

// claim puts absent block b in flight.
func (c *lru) claim(b int32) {
	c.nodes[c.newNode(b)].inflight = true
}

// makeRoom evicts the least recently used resident block when every
// place is taken, and returns it.
func (c *lru) makeRoom() victim {
	if c.n < c.cap || c.n == 0 {
		return victim{}
	}
	v := c.nodes[0].next
	c.unlink(v)
	nd := c.nodes[v]
	delete(c.index, nd.block)
	c.free = append(c.free, v)
	c.n--
	c.evictions++
	return victim{block: nd.block, dirty: nd.dirty, ok: true}
}

// commit makes in-flight block b resident and most recently used, dirty
// as given, and returns the block it evicted, if any.
func (c *lru) commit(b int32, dirty bool) victim {
	v := c.makeRoom()
	i := c.index[b]
	c.nodes[i].inflight, c.nodes[i].dirty = false, dirty
	c.pushBack(i)
	c.n++
	return v
}

// insert makes absent block b resident and most recently used, dirty as
// given, and returns the block it evicted, if any; a present block is
// touched instead (and keeps its dirty mark unless dirty); b must not be
// in flight.
func (c *lru) insert(b int32, dirty bool) victim {
	if i, ok := c.index[b]; ok {
		c.nodes[i].dirty = c.nodes[i].dirty || dirty
		c.touch(b)
		return victim{}
	}
	v := c.makeRoom()
	i := c.newNode(b)
	c.nodes[i].dirty = dirty
	c.pushBack(i)
	c.n++
	return v
}
