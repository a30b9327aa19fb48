package l1ref

import (
	"cmp"
	"slices"

	"github.com/kvalloc/kvalloc/l1"
)

// This file models l1's eviction policies (l1/policy.go) as plainly as
// possible. Every policy orders the evictable objects:
//
//   - LRU: by last use (the model's used stamp).
//   - Prefix: by operation of last use, then position in the chain, the
//     highest first, then last use, the latest first: what one call makes
//     recent is ranked tail first.
//   - S3-FIFO: two FIFO queues of keys and a ghost queue, replayed step by
//     step as l1 runs them.
//
// The model does not follow each call's transitions. It reconciles the
// policy with the objects at the start and end of every Sweep, and so at
// the start of every call: an object that became evictable since joins its
// queue, those that joined together in the order they were last used, which
// is the order l1 adds them in (every call that makes an object evictable
// also marks it used, key by key); an object that stopped being evictable,
// or is gone, leaves.

// partial reports whether o carries the l1.Partial hint. An object that
// joins the set with it is the next victim under LRU and prefix (the
// latest to join first), and joins the front of its queue under S3-FIFO,
// until a use clears it.
func partial(o *object) bool { return o.pos&l1.Partial != 0 }

// s3 queues.
const (
	s3None uint8 = iota
	s3Main
	s3Small
)

// maxFreq is l1's cap on S3-FIFO's use count.
const maxFreq = 3

// s3Entry is a place in an S3-FIFO queue: the key and the object that
// joined, so an entry of a removed object is recognized as stale.
type s3Entry[K comparable] struct {
	key K
	o   *object
}

// policyState is the model's S3-FIFO state.
type policyState[K comparable] struct {
	small, main []s3Entry[K]
	ghost       []K
	enters      uint64 // objects that joined the set, for object.enter
}

// hit counts a use for S3-FIFO: a read, a touch, a rewrite.
func (m *Manager[K]) hit(o *object) {
	o.pos &^= l1.Partial
	if o.freq < maxFreq {
		o.freq++
	}
}

// live reports whether e is an object in the policy.
func (m *Manager[K]) live(e s3Entry[K]) bool {
	o, ok := m.objects[e.key]
	return ok && o == e.o && o.inSet
}

// syncPolicy reconciles the policy with the objects (see above).
func (m *Manager[K]) syncPolicy() {
	var entering []K
	for k, o := range m.objects {
		ev := o.evictable(m.Now)
		switch {
		case o.inSet && !ev:
			o.inSet = false
		case !o.inSet && ev:
			entering = append(entering, k)
		}
	}
	if m.Cfg.Eviction == l1.EvictS3FIFO {
		m.pol.small = slices.DeleteFunc(m.pol.small, func(e s3Entry[K]) bool { return !m.live(e) })
		m.pol.main = slices.DeleteFunc(m.pol.main, func(e s3Entry[K]) bool { return !m.live(e) })
	}
	slices.SortFunc(entering, func(a, b K) int { return cmp.Compare(m.objects[a].used, m.objects[b].used) })
	for _, k := range entering {
		o := m.objects[k]
		o.inSet = true
		m.pol.enters++
		o.enter = m.pol.enters
		if m.Cfg.Eviction != l1.EvictS3FIFO {
			continue
		}
		if o.home == s3None {
			o.home = s3Small
			if !partial(o) && slices.Contains(m.pol.ghost, k) {
				o.home = s3Main
			}
		}
		if partial(o) { // the cold end: the front of its queue
			if o.home == s3Small {
				m.pol.small = slices.Insert(m.pol.small, 0, s3Entry[K]{k, o})
			} else {
				m.pol.main = slices.Insert(m.pol.main, 0, s3Entry[K]{k, o})
			}
			continue
		}
		m.pushS3(s3Entry[K]{k, o})
	}
}

func (m *Manager[K]) pushS3(e s3Entry[K]) {
	if e.o.home == s3Small {
		m.pol.small = append(m.pol.small, e)
	} else {
		m.pol.main = append(m.pol.main, e)
	}
}

func (m *Manager[K]) smallBytes() int64 {
	var n int64
	for _, e := range m.pol.small {
		if m.live(e) {
			n += e.o.block.Size
		}
	}
	return n
}

// victims returns the policy's next victim not named in request, or false
// when none is left. LRU and prefix victims come from sorting; S3-FIFO runs
// its queues, setting aside (in aside) the named keys it meets at a front.
func (m *Manager[K]) victim(request map[K]int, aside *[]s3Entry[K]) (K, bool) {
	var zero K
	if m.Cfg.Eviction != l1.EvictS3FIFO {
		var cand []K
		for k, o := range m.objects {
			if _, named := request[k]; !named && o.inSet {
				cand = append(cand, k)
			}
		}
		if len(cand) == 0 {
			return zero, false
		}
		return slices.MinFunc(cand, func(a, b K) int {
			oa, ob := m.objects[a], m.objects[b]
			if pa, pb := partial(oa), partial(ob); pa || pb {
				// Partial objects first, the latest to join first.
				if pa != pb {
					if pa {
						return -1
					}
					return 1
				}
				return cmp.Compare(ob.enter, oa.enter)
			}
			if m.Cfg.Eviction == l1.EvictPrefix {
				return cmp.Or(cmp.Compare(oa.op, ob.op), cmp.Compare(ob.pos, oa.pos), cmp.Compare(ob.used, oa.used))
			}
			return cmp.Compare(oa.used, ob.used)
		}), true
	}
	target := m.Mem.Capacity() / 10
	for {
		m.pol.small = slices.DeleteFunc(m.pol.small, func(e s3Entry[K]) bool { return !m.live(e) })
		m.pol.main = slices.DeleteFunc(m.pol.main, func(e s3Entry[K]) bool { return !m.live(e) })
		var t s3Entry[K]
		if len(m.pol.small) > 0 && (m.smallBytes() >= target || len(m.pol.main) == 0) {
			t = m.pol.small[0]
			if t.o.freq > 0 { // promote
				m.pol.small = m.pol.small[1:]
				t.o.freq, t.o.home = 0, s3Main
				m.pol.main = append(m.pol.main, t)
				continue
			}
			m.pol.small = m.pol.small[1:]
		} else {
			if len(m.pol.main) == 0 {
				return zero, false
			}
			t = m.pol.main[0]
			m.pol.main = m.pol.main[1:]
			if t.o.freq > 0 { // reinsert
				t.o.freq--
				m.pol.main = append(m.pol.main, t)
				continue
			}
		}
		if _, named := request[t.key]; named && aside != nil {
			*aside = append(*aside, t)
			continue
		}
		// Put the victim back at its front: evicted() or the caller
		// removes it.
		if t.o.home == s3Small {
			m.pol.small = slices.Insert(m.pol.small, 0, t)
		} else {
			m.pol.main = slices.Insert(m.pol.main, 0, t)
		}
		return t.key, true
	}
}

// restore puts the entries set aside back at the fronts of their queues,
// in their order.
func (m *Manager[K]) restore(aside []s3Entry[K]) {
	for i := len(aside) - 1; i >= 0; i-- {
		e := aside[i]
		if e.o.home == s3Small {
			m.pol.small = slices.Insert(m.pol.small, 0, e)
		} else {
			m.pol.main = slices.Insert(m.pol.main, 0, e)
		}
	}
}

// evict removes k, the policy's victim, counting it; S3-FIFO remembers a
// victim of its small queue in the ghost queue.
func (m *Manager[K]) evict(k K) {
	o := m.objects[k]
	if m.Cfg.Eviction == l1.EvictS3FIFO && o.home == s3Small {
		n := 0
		for _, x := range m.objects {
			if x.inSet {
				n++
			}
		}
		for len(m.pol.ghost) >= max(n, 16) {
			m.pol.ghost = m.pol.ghost[1:]
		}
		m.pol.ghost = append(m.pol.ghost, k)
	}
	o.inSet = false
	m.remove(k)
	m.Counters.Evictions++
}

// clonePolicy copies the policy state for Clone, onto c's objects.
func (m *Manager[K]) clonePolicy(c *Manager[K]) {
	remap := func(es []s3Entry[K]) []s3Entry[K] {
		out := make([]s3Entry[K], 0, len(es))
		for _, e := range es {
			if o, ok := m.objects[e.key]; ok && o == e.o {
				out = append(out, s3Entry[K]{e.key, c.objects[e.key]})
			} else { // stale here, stale there
				out = append(out, s3Entry[K]{e.key, &object{}})
			}
		}
		return out
	}
	c.pol = policyState[K]{
		small:  remap(m.pol.small),
		main:   remap(m.pol.main),
		ghost:  slices.Clone(m.pol.ghost),
		enters: m.pol.enters,
	}
}
