package trace

// lruCache is the ideal LRU bound: the textbook cache, a hash map from
// block to node and a doubly linked recency list, with exactly Slots
// places and no allocator, no locks and no failures. It follows the
// request model with l1's recency rules: a hit makes its block most
// recently used; a missing block is claimed at arrival (later requests
// miss it and do not store it again) and becomes resident, most recently
// used, when its request finishes, evicting the least recently used
// resident block when all slots are taken. Blocks behind a miss that are
// resident are neither touched nor stored again. Unlike l1 it may evict a
// block that an in-flight request is reading, and in-flight blocks take no
// slot: it is a bound, not a model of l1.
type lruCache struct {
	slots     int
	index     map[int32]int32 // block → node
	nodes     []lruNode       // node 0 is the list's sentinel
	freeNodes []int32
	n         int // resident blocks
	evictions uint64
	calls     int64
}

type lruNode struct {
	block      int32
	prev, next int32
	inflight   bool
}

func newLRUCache(slots int64) *lruCache {
	c := &lruCache{slots: int(slots), index: make(map[int32]int32), nodes: make([]lruNode, 1, 1024)}
	return c
}

func (c *lruCache) unlink(i int32) {
	nd := &c.nodes[i]
	c.nodes[nd.prev].next = nd.next
	c.nodes[nd.next].prev = nd.prev
}

func (c *lruCache) pushBack(i int32) {
	tail := c.nodes[0].prev
	c.nodes[i].prev, c.nodes[i].next = tail, 0
	c.nodes[tail].next = i
	c.nodes[0].prev = i
}

func (c *lruCache) lookup(f *flight) error {
	c.calls++
	for j, b := range f.req.Blocks {
		i, ok := c.index[b]
		if !ok || c.nodes[i].inflight {
			f.hits = j
			return nil
		}
		c.unlink(i)
		c.pushBack(i)
	}
	f.hits = len(f.req.Blocks)
	return nil
}

func (c *lruCache) store(f *flight) error {
	c.calls++
	for _, b := range f.req.Blocks[f.hits:] {
		if _, ok := c.index[b]; ok {
			continue
		}
		var i int32
		if n := len(c.freeNodes); n > 0 {
			i, c.freeNodes = c.freeNodes[n-1], c.freeNodes[:n-1]
		} else {
			i = int32(len(c.nodes))
			c.nodes = append(c.nodes, lruNode{})
		}
		c.nodes[i] = lruNode{block: b, inflight: true}
		c.index[b] = i
		f.granted = append(f.granted, b)
	}
	return nil
}

func (c *lruCache) finish(f *flight) ([]int32, error) {
	c.calls++
	for _, b := range f.granted {
		i := c.index[b]
		if c.n == c.slots {
			v := c.nodes[0].next
			c.unlink(v)
			delete(c.index, c.nodes[v].block)
			c.freeNodes = append(c.freeNodes, v)
			c.n--
			c.evictions++
		}
		c.nodes[i].inflight = false
		c.pushBack(i)
		c.n++
	}
	return f.granted, nil
}

func (c *lruCache) sweep() error { return nil }

func (c *lruCache) readable(b int32) bool {
	i, ok := c.index[b]
	return ok && !c.nodes[i].inflight
}

func (c *lruCache) observe(*flight) {}

func (c *lruCache) close(res *Result) error {
	res.Evictions = c.evictions
	res.L1Calls = c.calls
	return nil
}
