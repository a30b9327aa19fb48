package trace

import (
	"container/heap"
	"math"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
)

// beladyCache is Belady's offline optimal policy (MIN) under the same
// request model and the same definition of a hit as lruCache: when a
// finished block needs a slot and all are taken, the resident block whose
// next use lies furthest in the future goes, or the new block itself is
// not admitted when its own next use is at least as far (bypass, which
// MIN may do). Ties go to the block deeper in its next request's chain,
// since a prefix hit reaches it last. A block's next use is the arrival of
// the next request that names it, after the moment in question.
//
// MIN minimizes misses when every reference is scored on its own. Here a
// hit is the longest resident prefix, so a resident block behind a miss
// does not count, and MIN is an upper bound on what an online policy
// reaches only approximately: a strong reference, not a proof.
type beladyCache struct {
	slots int
	// arrival[i] is request i's arrival; occ[k] the request of flat
	// reference k (references numbered request by request, block by
	// block); next[k] the next reference to the same block, or -1; first[i]
	// the number of request i's first reference.
	arrival []int64
	occReq  []int32
	next    []int32
	first   []int32
	// per block: its place in the heap (-1: not resident), whether it is
	// being written, and its key.
	pos                 []int32
	inflight            []bool
	use                 []int64 // next use time
	depth               []int32 // chain position at that use
	occAt               []int32 // reference that claimed it, while in flight
	h                   beladyHeap
	cur                 int32 // current request
	evictions, bypassed uint64
	calls               int64
	clock               *sim.Clock
}

func newBeladyCache(tr *Trace, reqs []Request, slots int64, arrival func(*Request) time.Duration, clock *sim.Clock) *beladyCache {
	c := &beladyCache{slots: int(slots)}
	c.arrival = make([]int64, len(reqs))
	c.first = make([]int32, len(reqs)+1)
	var refs int
	for i := range reqs {
		c.arrival[i] = int64(arrival(&reqs[i]))
		c.first[i] = int32(refs)
		refs += len(reqs[i].Blocks)
	}
	c.first[len(reqs)] = int32(refs)
	c.occReq = make([]int32, refs)
	c.next = make([]int32, refs)
	last := make([]int32, tr.Distinct)
	for i := range last {
		last[i] = -1
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		bs := reqs[i].Blocks
		for j := len(bs) - 1; j >= 0; j-- {
			k := c.first[i] + int32(j)
			c.occReq[k] = int32(i)
			c.next[k] = last[bs[j]]
			last[bs[j]] = k
		}
	}
	c.pos = make([]int32, tr.Distinct)
	for i := range c.pos {
		c.pos[i] = -1
	}
	c.inflight = make([]bool, tr.Distinct)
	c.use = make([]int64, tr.Distinct)
	c.depth = make([]int32, tr.Distinct)
	c.occAt = make([]int32, tr.Distinct)
	c.h.c = c
	c.clock = clock
	return c
}

// setNext sets block b's next use to reference k's (k < 0: never).
func (c *beladyCache) setNext(b int32, k int32) {
	if k < 0 {
		c.use[b], c.depth[b] = math.MaxInt64, math.MaxInt32
		return
	}
	r := c.occReq[k]
	c.use[b], c.depth[b] = c.arrival[r], k-c.first[r]
}

func (c *beladyCache) lookup(f *flight) error {
	c.calls++
	i := int32(f.idx)
	c.cur = i
	bs := f.req.Blocks
	f.hits = len(bs)
	for j, b := range bs {
		if c.pos[b] < 0 {
			if f.hits == len(bs) {
				f.hits = j
			}
			continue
		}
		// Resident: this reference is used up, hit or not.
		c.setNext(b, c.next[c.first[i]+int32(j)])
		heap.Fix(&c.h, int(c.pos[b]))
	}
	return nil
}

func (c *beladyCache) store(f *flight) error {
	c.calls++
	i := c.cur
	for j, b := range f.req.Blocks[f.hits:] {
		if c.pos[b] >= 0 || c.inflight[b] {
			continue
		}
		c.inflight[b] = true
		c.occAt[b] = c.first[i] + int32(f.hits+j)
		f.granted = append(f.granted, b)
	}
	return nil
}

func (c *beladyCache) finish(f *flight) ([]int32, error) {
	c.calls++
	now := int64(c.clock.Now())
	var stored []int32
	for _, b := range f.granted {
		c.inflight[b] = false
		// The next use is the first later reference whose request arrives
		// at or after now: those before it missed while b was in flight.
		k := c.next[c.occAt[b]]
		for k >= 0 && c.arrival[c.occReq[k]] < now {
			k = c.next[k]
		}
		c.setNext(b, k)
		if len(c.h.ids) == c.slots {
			top := c.h.ids[0]
			if !c.h.later(top, b) {
				c.bypassed++
				continue
			}
			heap.Pop(&c.h)
			c.evictions++
		}
		heap.Push(&c.h, b)
		stored = append(stored, b)
	}
	return stored, nil
}

func (c *beladyCache) sweep() error { return nil }

func (c *beladyCache) readable(b int32) bool { return c.pos[b] >= 0 }

func (c *beladyCache) observe(*flight) {}

func (c *beladyCache) close(res *Result) error {
	res.Evictions = c.evictions
	res.L1Calls = c.calls
	return nil
}

// beladyHeap is a max-heap of resident blocks by (next use, depth).
type beladyHeap struct {
	c   *beladyCache
	ids []int32
}

// later reports whether block a's next use comes after b's (deeper first
// on a tie).
func (h *beladyHeap) later(a, b int32) bool {
	c := h.c
	if c.use[a] != c.use[b] {
		return c.use[a] > c.use[b]
	}
	return c.depth[a] > c.depth[b]
}

func (h *beladyHeap) Len() int           { return len(h.ids) }
func (h *beladyHeap) Less(i, j int) bool { return h.later(h.ids[i], h.ids[j]) }
func (h *beladyHeap) Swap(i, j int) {
	h.ids[i], h.ids[j] = h.ids[j], h.ids[i]
	h.c.pos[h.ids[i]] = int32(i)
	h.c.pos[h.ids[j]] = int32(j)
}
func (h *beladyHeap) Push(x any) {
	b := x.(int32)
	h.c.pos[b] = int32(len(h.ids))
	h.ids = append(h.ids, b)
}
func (h *beladyHeap) Pop() any {
	b := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	h.c.pos[b] = -1
	return b
}
