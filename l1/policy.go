package l1

import (
	"fmt"
	"slices"
)

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
	// less recent than an earlier one, so a chain's tail is evicted
	// before its head (a head evicted first leaves its tail resident but
	// unreachable, since a lookup stops at the first miss). The chain
	// order is the key's position given to ReserveWriteChain, and within
	// one position the reverse of the call's key order, so a caller that
	// names a chain's keys in order needs no positions at all.
	//
	// With the usual request flow (read-lock the cached prefix, write the
	// missing blocks, FinishWrite them, FinishRead the prefix) every block
	// ends colder than its predecessors, so the policy never evicts a block
	// whose successors stay resident, the invariant of a radix-tree cache,
	// without a tree: O(1) per key, no parent lookups.
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
	// goes after it, ranked by position (settle). ranked lists the
	// operation's entries after it, in order (an object's rank is its
	// entry's number, from 1); dirty says they need ranking.
	anchor int32
	ranked []rankEntry
	dirty  bool
	// settle's scratch.
	order  []int32
	counts []int32
	keys   []uint64
	spare  []uint64
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

// begin starts an operation, ranking what the last one made recent.
func (e *evictSet[K]) begin() {
	if e.dirty {
		e.settle()
	}
	e.anchor, e.ranked = e.main.tail, e.ranked[:0]
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
	e.pushFront(o, q)
}

// pushFront puts o at the front of queue q. Under the prefix policy the
// front is before what the current operation made recent even when the
// list held nothing else as it began: o then becomes the anchor.
func (e *evictSet[K]) pushFront(o *object[K], q evQueue) {
	e.queue(q).pushFront(o)
	if q == evSmall {
		e.smallBytes += o.block.Size
	}
	if e.policy == EvictPrefix && e.anchor == 0 {
		e.anchor = o.idx
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
	o.rank = 0 // its entry in ranked, if any, is stale
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

// rankEntry is one entry of the current operation's objects into the
// prefix policy's list: the record and its position then.
type rankEntry struct {
	idx int32
	pos uint32
}

// insertRanked puts o, for the prefix policy, among what the current
// operation made recent: after the anchor, the higher positions first and,
// within a position, the later entries first. It appends o and its entry,
// and leaves the order to settle, which sorts the operation's objects
// once, before the next victim is chosen or the next operation begins:
// O(1) per key whatever the order of the call's keys (a serving engine's
// store batch names chain after chain, positions 0..k each time).
func (e *evictSet[K]) insertRanked(o *object[K]) {
	e.ranked = append(e.ranked, rankEntry{idx: o.idx, pos: o.pos})
	o.rank = uint32(len(e.ranked))
	e.main.pushBack(o)
	e.dirty = true
}

// settle puts the objects after the anchor, what the current operation
// made recent, in the prefix policy's order: by position, the highest
// first, and within a position by entry, the latest first. It sorts the
// entries, not the list: a counting sort by position when the positions
// span little more than the entries (chains of consecutive positions), a
// radix sort otherwise, then one pass over the records in the new order
// that skips stale entries (an object that left, or entered again, since:
// its rank is no longer the entry's number) and relinks the rest.
func (e *evictSet[K]) settle() {
	e.dirty = false
	rs := e.ranked
	lo, hi := ^uint32(0), uint32(0)
	for _, r := range rs {
		lo, hi = min(lo, r.pos), max(hi, r.pos)
	}
	order := slices.Grow(e.order[:0], len(rs))[:len(rs)]
	if span := int(hi - lo); len(rs) > 0 && span <= 4*len(rs)+256 {
		counts := slices.Grow(e.counts[:0], span+2)[:span+2]
		clear(counts)
		for _, r := range rs {
			counts[hi-r.pos+1]++
		}
		for b := 1; b < len(counts); b++ {
			counts[b] += counts[b-1]
		}
		for i := len(rs) - 1; i >= 0; i-- { // the latest entry first
			b := hi - rs[i].pos
			order[counts[b]] = int32(i)
			counts[b]++
		}
		e.counts = counts
	} else {
		keys := slices.Grow(e.keys[:0], len(rs))[:len(rs)]
		for i, r := range rs {
			keys[i] = uint64(^r.pos)<<32 | uint64(^uint32(i))
		}
		keys, e.spare = radixSort(keys, e.spare)
		for j, k := range keys {
			order[j] = int32(^uint32(k))
		}
		e.keys = keys
	}
	live := order[:0]
	for _, i := range order {
		if r := rs[i]; e.s.rec(r.idx).rank == uint32(i)+1 {
			live = append(live, r.idx)
		}
	}
	e.main.relinkAfter(e.anchor, live)
	e.order = order
}

// radixSort sorts keys ascending by a least significant digit first radix
// sort of bytes, skipping the bytes every key shares; short inputs are
// insertion-sorted. spare is a second buffer, not sharing memory with
// keys, grown as needed. It returns the sorted keys and the other buffer.
func radixSort(keys, spare []uint64) ([]uint64, []uint64) {
	if len(keys) <= 32 {
		for i := 1; i < len(keys); i++ {
			for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
				keys[j], keys[j-1] = keys[j-1], keys[j]
			}
		}
		return keys, spare
	}
	var diff uint64
	for _, k := range keys {
		diff |= k ^ keys[0]
	}
	spare = slices.Grow(spare[:0], len(keys))[:len(keys)]
	for shift := uint(0); shift < 64; shift += 8 {
		if diff>>shift&0xff == 0 {
			continue
		}
		var count [256]int
		for _, k := range keys {
			count[k>>shift&0xff]++
		}
		sum := 0
		for b, c := range count {
			count[b], sum = sum, sum+c
		}
		for _, k := range keys {
			d := k >> shift & 0xff
			spare[count[d]] = k
			count[d]++
		}
		keys, spare = spare, keys
	}
	return keys, spare
}

// victim returns the object the policy evicts next, still in the set, or
// nil when the set is empty (but for objects set aside).
func (e *evictSet[K]) victim() *object[K] {
	if e.policy != EvictS3FIFO {
		if e.dirty {
			e.settle()
		}
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
		e.pushFront(o, q)
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
