package l1

import "fmt"

// Eviction policies.
//
// The policy decides which evictable object goes first; what is evictable
// (evictableLocked) and when eviction runs (on demand, EvictTo) are the
// manager's and the same under every policy.
//
// The policy's structures hold evictable objects only. An object enters
// when it becomes evictable (FinishWrite; FinishRead releasing its last
// read lock; its read lock lapsing) and leaves when it stops being
// evictable (a lock, a removal). So a victim search never walks a locked
// or unfinished object, and costs O(victims) however many of those there
// are (amortized for S3-FIFO, whose main queue reinserts objects that were
// used, once per use).
//
// Recency. Every object also carries a recency stamp (Snapshot's order;
// see recency.go). An object becomes most recently used when a call reserves,
// finishes, read-locks or releases it, or touches it, and when its read
// lock lapses: release counts as use, as in vLLM's free-block queue, so
// that the policy can append an object that turns evictable at its tail in
// O(1) instead of searching for its place.

// EvictionPolicy says which evictable object eviction takes first.
type EvictionPolicy uint8

const (
	// EvictLRU, the zero value, evicts the least recently used evictable
	// object first, in Snapshot's order.
	EvictLRU EvictionPolicy = iota
	// EvictPrefix is LRU, except that the objects one call makes recently
	// used are ranked tail first: a later block of a prefix chain becomes
	// less recent than an earlier one, so a chain's tail is evicted before
	// its head (Mooncake issue #492). The chain order is the key's position
	// given to ReserveWriteChain, and within one position the reverse of
	// the call's key order, so a caller that names a chain's keys in order
	// needs no positions at all.
	//
	// With the usual request flow (read-lock the cached prefix, write the
	// missing blocks, FinishWrite them, FinishRead the prefix) every block
	// ends colder than its predecessors, so the policy never evicts a block
	// whose successors stay resident, the invariant of a radix-tree cache
	// (Mooncake RFC #1998), without a tree: O(1) per key, no parent lookups.
	EvictPrefix
	// EvictS3FIFO is S3-FIFO (Yang et al., SOSP '23): a small FIFO queue for
	// new objects, a tenth of the memory's capacity (Stats().Capacity, read
	// at each eviction, so a tenth of what a growing region has made usable
	// so far), a main FIFO queue with
	// reinsertion, and a ghost queue of keys recently evicted from the small
	// one. An object used again while in the small queue moves to the main
	// one; one used only once leaves from the small queue, so a scan of
	// one-hit objects never flushes the main queue. A new object whose key
	// is in the ghost queue goes straight to the main queue. Each object
	// keeps a use count of 0 to 3; the main queue reinserts an object whose
	// count is positive, decrementing it. A locked object is out of its
	// queue; released, it re-enters the same queue at its tail.
	EvictS3FIFO
)

// Partial, OR'ed into a key's position in ReserveWriteChain, says that the
// key's block is partial: the last block of a prompt whose tokens do not
// fill it. A serving engine knows this when it stores the block, and such a
// block is nearly dead on arrival: when the conversation goes on, the
// block's tokens are followed by more, so the next turn's chain names a
// different key for it (in Mooncake's conversation trace, 96 of 11,913
// partial last blocks were ever read again). An object stored with the hint
// goes, when it becomes evictable, to the cold end. Under LRU and the
// prefix policy that is the front of the one list: it is the next victim,
// before every object stored without it (the latest such object first).
// Under S3-FIFO it is the front of the object's queue, the small one for a
// new object: the next object that queue gives up, without promotion, while
// the main queue keeps its own order. A use (a read, a touch, a rewrite)
// clears the hint, and the object is ranked as any other from then on; so a
// call that re-locks an existing key (ModeAll, ModeUpdate) drops the hint
// it passes for it, since the rewrite is itself a use. The prefix policy
// reads the flag as the highest position, so a partial block is also its
// chain's tail.
const Partial uint32 = 1 << 31

// EvictionPolicies lists every policy, for tests and benchmarks that run
// once per policy.
var EvictionPolicies = []EvictionPolicy{EvictLRU, EvictPrefix, EvictS3FIFO}

var policyNames = [...]string{EvictLRU: "lru", EvictPrefix: "prefix", EvictS3FIFO: "s3fifo"}

// String returns "lru", "prefix" or "s3fifo".
func (p EvictionPolicy) String() string {
	if p.valid() {
		return policyNames[p]
	}
	return fmt.Sprintf("EvictionPolicy(%d)", uint8(p))
}

// ParseEvictionPolicy is the inverse of EvictionPolicy.String.
func ParseEvictionPolicy(s string) (EvictionPolicy, error) {
	for _, p := range EvictionPolicies {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown eviction policy %q", ErrInvalidArgument, s)
}

// MarshalText implements encoding.TextMarshaler, for config files.
func (p EvictionPolicy) MarshalText() ([]byte, error) {
	if !p.valid() {
		return nil, fmt.Errorf("%w: unknown eviction policy %d", ErrInvalidArgument, uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (p *EvictionPolicy) UnmarshalText(b []byte) error {
	q, err := ParseEvictionPolicy(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

func (p EvictionPolicy) valid() bool { return p <= EvictS3FIFO }

// evQueue says which of the policy's lists holds an object.
type evQueue uint8

const (
	evNone  evQueue = iota // not evictable: in no list
	evMain                 // LRU and prefix: the list; S3-FIFO: the main queue
	evSmall                // S3-FIFO: the small queue
	evAside                // set aside by the current on-demand eviction
)

// maxFreq caps S3-FIFO's use count (two bits).
const maxFreq = 3

// evictSet is the policy's view of the evictable objects.
type evictSet[K comparable] struct {
	policy EvictionPolicy
	s      *store[K]
	main   list[K]
	small  list[K] // S3-FIFO only
	// smallBytes is the bytes in small; smallTarget a tenth of the memory
	// usable at the current eviction (sized).
	smallBytes, smallTarget int64
	ghost                   ghost
	// anchor is, for the prefix policy, the last object of main when the
	// current operation began (0: none): what the operation makes recent
	// goes after it, ranked by position.
	anchor int32
	// aside holds the objects the current on-demand eviction skipped
	// (keys of its own call), to put back where they were.
	aside []int32
	n     int // objects in the set, aside ones included
}

func (e *evictSet[K]) init(s *store[K], p EvictionPolicy) {
	e.policy, e.s = p, s
	e.main.init(s, setEvict)
	e.small.init(s, setEvict)
}

// sized sets S3-FIFO's small queue to a tenth of capacity, the bytes the
// memory can use now. Every eviction calls it first: the capacity of a
// memory over a GrowingRegion grows after New (from 0 over a fresh
// SegmentedRegion), and a target fixed then would evict new objects ahead
// of cold ones for ever.
func (e *evictSet[K]) sized(capacity int64) { e.smallTarget = capacity / 10 }

// reset forgets everything, for Close.
func (e *evictSet[K]) reset() {
	p, s := e.policy, e.s
	*e = evictSet[K]{}
	e.init(s, p)
}

// begin starts an operation.
func (e *evictSet[K]) begin() {
	e.anchor = e.main.tail
}

func (e *evictSet[K]) queue(q evQueue) *list[K] {
	if q == evSmall {
		return &e.small
	}
	return &e.main
}

// enter adds o, which just became evictable.
func (e *evictSet[K]) enter(o *object[K]) {
	e.n++
	if o.pos&Partial != 0 {
		e.enterCold(o)
		return
	}
	switch e.policy {
	case EvictPrefix:
		o.evq = evMain
		e.insertRanked(o)
	case EvictS3FIFO:
		if o.home == evNone {
			o.home = evSmall
			if e.ghost.has(e.s.hash64(o.key)) {
				o.home = evMain
			}
		}
		e.link(o, o.home)
	default:
		e.link(o, evMain)
	}
}

// enterCold puts o, stored with the Partial hint and not used since, at
// the cold end: the front of the list, or of S3-FIFO's small queue.
func (e *evictSet[K]) enterCold(o *object[K]) {
	q := evMain
	if e.policy == EvictS3FIFO {
		if o.home == evNone {
			o.home = evSmall
		}
		q = o.home
	}
	o.evq = q
	e.queue(q).pushFront(o)
	if q == evSmall {
		e.smallBytes += o.block.Size
	}
}

// link appends o to queue q.
func (e *evictSet[K]) link(o *object[K], q evQueue) {
	o.evq = q
	e.queue(q).pushBack(o)
	if q == evSmall {
		e.smallBytes += o.block.Size
	}
}

// unlink takes o out of its list, keeping it in the set.
func (e *evictSet[K]) unlink(o *object[K]) {
	if o.idx == e.anchor {
		e.anchor = e.main.links(o).prev
	}
	e.queue(o.evq).remove(o)
	if o.evq == evSmall {
		e.smallBytes -= o.block.Size
	}
}

// leave removes o, which stopped being evictable or is being removed.
func (e *evictSet[K]) leave(o *object[K]) {
	if o.evq != evAside {
		e.unlink(o)
	}
	o.evq = evNone
	e.n--
}

// used records that o, in the set, became most recently used.
func (e *evictSet[K]) used(o *object[K]) {
	switch e.policy {
	case EvictLRU:
		e.main.moveToBack(o)
	case EvictPrefix:
		e.unlink(o)
		e.insertRanked(o)
	}
	// S3-FIFO queues are FIFO: use shows in the count (hit), not the order.
}

// hit records a use of o for S3-FIFO's count: a read, a touch or a rewrite.
// o need not be in the set.
func (e *evictSet[K]) hit(o *object[K]) {
	o.pos &^= Partial // used: no longer dead on arrival
	if o.freq < maxFreq {
		o.freq++
	}
}

// insertRanked puts o, for the prefix policy, among what the current
// operation made recent: after the anchor, the higher positions first and,
// within a position, the later calls first. Keys named in position order,
// rising or falling, cost O(1) each.
func (e *evictSet[K]) insertRanked(o *object[K]) {
	var at, first *object[K]
	if e.anchor != 0 {
		at = e.s.rec(e.anchor)
		first = e.main.after(at)
	} else {
		first = e.main.front()
	}
	switch last := e.main.back(); {
	case first == nil || o.pos >= first.pos:
		e.main.insertAfter(o, at)
	case o.pos < last.pos:
		e.main.pushBack(o)
	default:
		x := e.main.after(first)
		for x.pos > o.pos {
			x = e.main.after(x)
		}
		e.main.insertBefore(o, x)
	}
}

// victim returns the object the policy evicts next, still in the set, or
// nil when the set is empty (but for objects set aside).
func (e *evictSet[K]) victim() *object[K] {
	if e.policy != EvictS3FIFO {
		return e.main.front()
	}
	for {
		if e.small.len > 0 && (e.smallBytes >= e.smallTarget || e.main.len == 0) {
			t := e.small.front()
			if t.freq == 0 {
				return t
			}
			// Used again while in the small queue: promote.
			e.unlink(t)
			t.freq, t.home = 0, evMain
			e.link(t, evMain)
			continue
		}
		t := e.main.front()
		if t == nil || t.freq == 0 {
			return t
		}
		t.freq--
		e.main.moveToBack(t)
	}
}

// evicted records that o, a victim, is about to be removed.
func (e *evictSet[K]) evicted(o *object[K]) {
	if e.policy == EvictS3FIFO && o.evq == evSmall {
		e.ghost.add(e.s.hash64(o.key), max(e.n, 16))
	}
}

// setAside takes o, a victim the current eviction must spare, out of its
// list until restore.
func (e *evictSet[K]) setAside(o *object[K]) {
	e.unlink(o)
	if e.policy != EvictS3FIFO {
		o.home = o.evq
	}
	o.evq = evAside
	e.aside = append(e.aside, o.idx)
}

// restore puts the objects set aside back at the front of their lists, in
// their order. An object removed meanwhile is skipped.
func (e *evictSet[K]) restore() {
	for i := len(e.aside) - 1; i >= 0; i-- {
		o := e.s.rec(e.aside[i])
		if o.evq != evAside {
			continue
		}
		q := o.home
		if e.policy != EvictS3FIFO {
			o.home = evNone
		}
		o.evq = q
		e.queue(q).pushFront(o)
		if q == evSmall {
			e.smallBytes += o.block.Size
		}
	}
	e.aside = e.aside[:0]
}

// ghost is S3-FIFO's ghost queue: the hashes of the keys last evicted
// from the small queue, oldest first, at most as many as the policy holds
// objects (16 at least). It keeps 64-bit hashes, not keys (which may hold
// pointers the collector would scan), so a collision, about n in 2⁶⁴ per
// lookup, only sends an object to the main queue early.
type ghost struct {
	ring  []uint64
	head  int // oldest
	n     int
	count map[uint64]int32
}

func (g *ghost) has(h uint64) bool { return g.count[h] > 0 }

// add appends h, first dropping the oldest hashes beyond limit-1.
func (g *ghost) add(h uint64, limit int) {
	if g.count == nil {
		g.count = map[uint64]int32{}
	}
	for g.n >= limit {
		g.pop()
	}
	if g.n == len(g.ring) {
		ring := make([]uint64, max(16, 2*len(g.ring)))
		for i := 0; i < g.n; i++ {
			ring[i] = g.ring[(g.head+i)%len(g.ring)]
		}
		g.ring, g.head = ring, 0
	}
	g.ring[(g.head+g.n)%len(g.ring)] = h
	g.n++
	g.count[h]++
}

func (g *ghost) pop() {
	h := g.ring[g.head]
	g.head = (g.head + 1) % len(g.ring)
	g.n--
	if g.count[h]--; g.count[h] <= 0 {
		delete(g.count, h)
	}
}
