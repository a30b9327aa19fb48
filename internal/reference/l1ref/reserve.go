package l1ref

import (
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// ReserveWrite models l1.Manager.ReserveWrite.
func (m *Manager[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	return m.ReserveWriteChain(keys, nil, temporary, size, mode)
}

// ReserveWriteChain models l1.Manager.ReserveWriteChain. Per key, in
// order: a repeat, a missing key in ModeUpdate and an existing key in
// ModeNew, or one that is locked, temporary or too small, is
// KeyNotWritable; a writable existing key is re-locked; a missing key
// needs memory. The keys needing memory are allocated together (allocate).
func (m *Manager[K]) ReserveWriteChain(keys []K, positions []uint32, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	bad := len(positions) != 0 && len(positions) != len(keys) || size <= 0 || !slices.Contains(l1.Modes, mode) ||
		len(temporary) != 0 && len(temporary) != len(keys)
	if err := m.begin(bad); err != nil {
		return nil, err
	}
	out := make([]l1.Result, len(keys))
	var need, relock []int
	first := firsts(keys)
	present := 0
	for i, k := range keys {
		o := m.objects[k]
		if o != nil {
			present++ // a write-side hit: the key was there before the call
		}
		switch {
		case first[k] != i:
			out[i].Status = l1.KeyNotWritable
		case o == nil && mode == l1.ModeUpdate, o != nil && mode == l1.ModeNew:
			out[i].Status = l1.KeyNotWritable
		case o == nil:
			need = append(need, i)
		case o.write.held(m.Now) || o.read.held(m.Now) || o.temporary || o.block.Size < size:
			out[i].Status = l1.KeyNotWritable
		default:
			relock = append(relock, i)
		}
	}
	var blocks []allocator.Block
	if len(need) > 0 {
		blocks = m.allocate(size, len(need), first)
		switch {
		case len(blocks) == 0:
			m.Counters.FailedReservations++
		case len(blocks) < len(need):
			m.Counters.PartialGrants++
		}
		m.Counters.OOMKeys += uint64(len(need) - len(blocks))
		if err := m.Mem.Take(blocks); err != nil {
			panic("l1ref: planned blocks do not fit: " + err.Error())
		}
	}
	pos := func(i int) uint32 {
		if len(positions) == 0 {
			return 0
		}
		return positions[i]
	}
	for j, i := range need {
		if j >= len(blocks) {
			out[i].Status = l1.OutOfMemory
			continue
		}
		o := &object{block: blocks[j], size: size, temporary: len(temporary) > 0 && temporary[i], pos: pos(i)}
		m.objects[keys[i]] = o
		out[i] = m.writeLock(o)
	}
	for _, i := range relock {
		o := m.objects[keys[i]]
		o.size, o.pos = size, pos(i) // a re-lock keeps the object's own temporary flag
		m.hit(o)
		out[i] = m.writeLock(o)
	}
	m.Counters.WriteReservations += uint64(len(relock) + len(blocks))
	m.count(l1.LookupWrite, len(keys), present, len(keys)-present)
	return out, nil
}

// writeLock makes o recently used and write-locks it under a new lease.
func (m *Manager[K]) writeLock(o *object) l1.Result {
	m.touch(o)
	o.wlease = m.nextLease()
	o.write.take(1, m.Now, m.Cfg.WriteTTL)
	return l1.Result{Status: l1.OK, Block: o.block, Lease: o.wlease}
}

// allocate plans n objects of size bytes: all of them, or after on-demand
// eviction, or the largest prefix (none for AllOrNothing or a one-key
// batch).
func (m *Manager[K]) allocate(size int64, n int, request map[K]int) []allocator.Block {
	if size > m.Mem.Capacity() {
		return nil
	}
	if bs, ok := m.Mem.PlanBatch(size, n, m.Cfg.Placement); ok {
		return bs
	}
	if m.Cfg.EvictOnDemand {
		if bs, ok := m.evictFor(size, n, request); ok {
			return bs
		}
	}
	if n <= 1 || m.Cfg.AllOrNothing {
		return nil
	}
	return m.Mem.PlanUpTo(size, n, m.Cfg.Placement)
}

// firsts maps each key to the index of its first occurrence.
func firsts[K comparable](keys []K) map[K]int {
	first := make(map[K]int, len(keys))
	for i, k := range keys {
		if _, ok := first[k]; !ok {
			first[k] = i
		}
	}
	return first
}
