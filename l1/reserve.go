package l1

import (
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
)

// Mode says which keys ReserveWrite may reserve.
type Mode uint8

const (
	// ModeAll, the zero value and LMCache's default, allocates missing
	// keys and re-locks writable existing ones.
	ModeAll Mode = iota
	// ModeNew allocates missing keys only; existing keys are
	// KeyNotWritable.
	ModeNew
	// ModeUpdate re-locks writable existing keys only; missing keys are
	// KeyNotWritable and nothing is allocated.
	ModeUpdate
)

// Modes lists every mode.
var Modes = []Mode{ModeAll, ModeNew, ModeUpdate}

var writeModeNames = [...]string{ModeAll: "all", ModeNew: "new", ModeUpdate: "update"}

// String returns LMCache's name for the mode: "all", "new" or "update".
func (w Mode) String() string {
	if w.valid() {
		return writeModeNames[w]
	}
	return fmt.Sprintf("Mode(%d)", uint8(w))
}

// ParseMode is the inverse of Mode.String.
func ParseMode(s string) (Mode, error) {
	for _, w := range Modes {
		if w.String() == s {
			return w, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown write mode %q", ErrInvalidArgument, s)
}

func (w Mode) valid() bool { return w <= ModeUpdate }

// ReserveWrite write-locks the keys for a write of size bytes each and
// returns their blocks, one Result per key in key order. Each granted key
// gets a new write lease (Result.Lease), which FinishWrite, AbortWrite or
// FinishWriteAndReserveRead must present: newly allocated keys first, in
// request order, then re-locked keys in request order.
//
// Validation comes first, and a bad call changes nothing: size must be
// positive, mode known, and temporary either empty (no key temporary) or one
// flag per key. The error wraps ErrInvalidArgument.
//
// Per key, in order:
//   - a key repeated in the call: KeyNotWritable at every occurrence after
//     the first, which alone is handled (no second allocation);
//   - an existing key in ModeNew mode, a missing key in ModeUpdate mode,
//     or an existing key that is not writable (locked, temporary, or with
//     a block smaller than size): KeyNotWritable;
//   - a writable existing key in ModeAll or ModeUpdate mode: OK
//     with its block, re-locked; its size becomes the call's, and it keeps
//     its own temporary flag (as in LMCache: the call's flag is for new
//     objects);
//   - a missing key in ModeAll or ModeNew mode: allocated, see below.
//
// The missing keys are allocated together, n objects of size bytes, in one
// call to the memory. When that does not fit:
//  1. With Config.EvictOnDemand, evictable objects (finished, no live
//     lock) are evicted, in the order of Config.Eviction, until the
//     batch fits or nothing evictable is left. Keys named in the call
//     are never evicted. Over the allocator with Scattered placement, a
//     victim's block of the batch's size is reissued to the batch rather
//     than freed (see evict.go); the batch then gets those blocks first.
//  2. If it still does not fit, the largest prefix that fits is granted
//     (prefix.go): the first k missing keys, in request order,
//     get OK and the rest OutOfMemory. A one-key batch, and a size
//     larger than the memory's capacity, are all or nothing.
//
// Without on-demand eviction, the call is AppendUpTo itself: one call in all, whether or not the batch fits. Missing keys
// past the most objects its capacity less the manager's own objects can
// hold are answered OutOfMemory without asking it (room.go), so that a
// call with no room for one object makes no call at all.
//
// An allocation error other than out-of-memory is returned as an error, and
// the call then leaves no reservation behind; objects it evicted or
// reclaimed as expired stay gone. After Close it returns ErrClosed.
//
// Listeners get one EventWriteReserved with every granted key, re-locked and
// allocated alike, in request order, preceded by any removals (expired,
// evicted) the call made.
func (m *Manager[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode Mode) ([]Result, error) {
	return m.reserveWrite(nil, keys, nil, temporary, size, mode)
}

// ReserveWriteChain is ReserveWrite for keys whose place in their prefix
// chains is known: positions[i] is keys[i]'s position in its chain, 0 for
// the first block of a prompt. The prefix-aware policy (EvictPrefix) evicts
// higher positions first among the objects one call makes recent; the
// other policies ignore positions. positions must be empty or hold one
// position per key; otherwise the error wraps ErrInvalidArgument and
// nothing changes. ReserveWrite is ReserveWriteChain with no positions,
// which ranks a call's keys by their order in the call.
func (m *Manager[K]) ReserveWriteChain(keys []K, positions []uint32, temporary []bool, size int64, mode Mode) ([]Result, error) {
	return m.AppendReserveWriteChain(nil, keys, positions, temporary, size, mode)
}

// AppendReserveWriteChain is ReserveWriteChain appending its Results, one
// per key in key order, to dst and returning the extended slice; it
// allocates no result slice when dst has room, which makes it the hot path
// of a serving engine's store. On an error it returns nil and the error, as
// ReserveWriteChain does, and dst's contents are unchanged.
func (m *Manager[K]) AppendReserveWriteChain(dst []Result, keys []K, positions []uint32, temporary []bool, size int64, mode Mode) ([]Result, error) {
	if len(positions) != 0 && len(positions) != len(keys) {
		return nil, fmt.Errorf("%w: %d positions for %d keys", ErrInvalidArgument, len(positions), len(keys))
	}
	return m.reserveWrite(dst, keys, positions, temporary, size, mode)
}

// reserveWrite appends a Result per key to dst (a new slice when dst is
// nil); see ReserveWrite.
func (m *Manager[K]) reserveWrite(dst []Result, keys []K, positions []uint32, temporary []bool, size int64, mode Mode) ([]Result, error) {
	switch {
	case size <= 0:
		return nil, fmt.Errorf("%w: size %d must be positive", ErrInvalidArgument, size)
	case !mode.valid():
		return nil, fmt.Errorf("%w: unknown write mode %d", ErrInvalidArgument, mode)
	case len(temporary) != 0 && len(temporary) != len(keys):
		return nil, fmt.Errorf("%w: %d temporary flags for %d keys", ErrInvalidArgument, len(temporary), len(keys))
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	var all []Result
	if dst == nil {
		all = make([]Result, len(keys))
	} else {
		all = slices.Grow(dst, len(keys))[:len(dst)+len(keys)]
		clear(all[len(dst):])
	}
	out := all[len(all)-len(keys):]

	// Each key is looked up once. An object the call has seen carries its
	// stamp: a later occurrence of its key is a repeat, and on-demand
	// eviction spares it. A missing key to allocate gets a placeholder
	// record at once, so that a repeat finds it; the placeholder is in the
	// index only (never used, in no queue) and is filled, or
	// removed, before the call returns. Nothing else can see it: the call holds the
	// manager lock throughout.
	m.stamp++
	stamp := m.stamp
	need, relock := m.picks[:0], m.relocks[:0]
	committed := false
	defer func() {
		if !committed { // an allocation error, or a panic in the memory
			for _, p := range need {
				o := m.objects.rec(p.rec)
				m.objects.remove(o)
				m.objects.release(o)
			}
		}
		m.picks, m.relocks = need[:0], relock[:0]
		m.past.used = false
	}()
	// A missing key past the room gets no placeholder (room.go): it is
	// OutOfMemory at once, or KeyNotWritable as a repeat of one.
	room, past := int64(-1), 0
	if !m.cfg.EvictOnDemand {
		room = m.roomLocked(size)
	}
	hits := 0
	m.beginHints(len(keys))
	for i := range keys {
		k := &keys[i]
		var h uint32
		var pos int
		o := m.hintLocked(i, k)
		if o == nil || o.anyLapsed(now) && !m.lapseLocked(o, now) {
			h = m.objects.hash(k)
			o, pos = m.lookupHashLocked(k, h, now)
		}
		// Present before the call: not a placeholder of this call (which
		// has no size yet).
		if o != nil && (o.stamp != stamp || o.size > 0) {
			hits++
		}
		switch {
		case o != nil && o.stamp == stamp: // a repeat
			out[i].Status = KeyNotWritable
		case o == nil && mode == ModeUpdate:
			out[i].Status = KeyNotWritable
		case o == nil && room >= 0 && m.pastRoomLocked(&room, size, len(need)):
			if m.seenPastLocked(keys, i, h) {
				out[i].Status = KeyNotWritable
			} else {
				out[i].Status = OutOfMemory
				past++
			}
		case o == nil:
			o = m.objects.alloc()
			o.key, o.hash, o.stamp = *k, h, stamp
			m.objects.insert(o, pos)
			m.setHint(i, o)
			need = append(need, pick{i: i, rec: o.idx})
		case mode == ModeNew || !m.writableLocked(o, size, now):
			o.stamp = stamp
			m.setHint(i, o)
			out[i].Status = KeyNotWritable
		default:
			o.stamp = stamp
			m.setHint(i, o)
			relock = append(relock, pick{i: i, rec: o.idx})
		}
	}

	var blocks []allocator.Block
	if len(need) > 0 {
		var err error
		blocks, err = m.allocateLocked(size, len(need), now)
		if err != nil {
			return nil, err
		}
	}
	if missing := len(need) + past; missing > 0 {
		switch {
		case len(blocks) == 0:
			m.stats.FailedReservations++
		case len(blocks) < missing:
			m.stats.PartialGrants++
		}
		m.stats.OOMKeys += uint64(missing - len(blocks))
	}

	// Nothing below can fail: apply the reservations.
	committed = true
	for j, p := range need {
		o, i := m.objects.rec(p.rec), p.i
		if j >= len(blocks) {
			m.objects.remove(o)
			m.objects.release(o)
			out[i].Status = OutOfMemory
			continue
		}
		o.block, o.size, o.temporary = blocks[j], size, flag(temporary, i)
		o.pos = position(positions, i)
		m.held += o.block.Size
		m.useLocked(o)
		m.writeLockLocked(o, now)
		out[i] = Result{Status: OK, Block: o.block, Lease: o.wlease}
	}
	for _, p := range relock {
		o, i := m.objects.rec(p.rec), p.i
		o.size = size // the object keeps its own temporary flag
		o.pos = position(positions, i)
		m.writeLockLocked(o, now)
		m.syncEvictLocked(o, now)
		m.touchLocked(o, true)
		out[i] = Result{Status: OK, Block: o.block, Lease: o.wlease}
	}
	m.stats.WriteReservations += uint64(len(relock) + len(blocks))
	m.countLookupsLocked(LookupWrite, hits, len(keys)-hits, 0)
	if m.listening() {
		var ok []K
		for i, r := range out {
			if r.Status == OK {
				ok = append(ok, keys[i])
			}
		}
		m.emitLocked(EventWriteReserved, ok)
	}
	return all, nil
}

// pick is a key ReserveWrite allocates or re-locks: its index in the call
// and its record (for a key to allocate, the placeholder). A record number,
// not a pointer: a slice of picks holds nothing the collector must scan.
type pick struct {
	i   int
	rec int32
}

func flag(temporary []bool, i int) bool { return len(temporary) > 0 && temporary[i] }

func position(positions []uint32, i int) uint32 {
	if len(positions) == 0 {
		return 0
	}
	return positions[i]
}

// writableLocked is LMCache's writable predicate, plus room for size bytes:
// no live lock, not temporary, and a block of at least size bytes.
func (m *Manager[K]) writableLocked(o *object[K], size int64, now int64) bool {
	return !o.write.held(now) && !o.read.held(now) && !o.temporary && o.block.Size >= size
}

// writeLockLocked write-locks o under a new lease.
func (m *Manager[K]) writeLockLocked(o *object[K], now int64) {
	o.wlease = m.nextLease()
	m.noteLease(o.wlease, o)
	o.write.lock(1, now, m.wttl)
	m.enqueueLocked(o, writeQueue)
}

// allocateLocked returns up to n blocks of size bytes: all n, or the
// largest prefix that fits after on-demand eviction, or none. It errs only
// when the memory fails for a reason other than lack of space, and then it
// holds no block.
//
// On-demand eviction begins by asking what fits now and allocates once,
// after the victims it needs, if any: a batch costs one allocation call,
// not a call that fails first.
func (m *Manager[K]) allocateLocked(size int64, n int, now int64) ([]allocator.Block, error) {
	if !m.cfg.EvictOnDemand {
		return m.allocUpToLocked(size, n)
	}
	if size > m.capacity {
		return nil, nil // never fits, whatever is evicted
	}
	blocks, err := m.evictForLocked(size, n, now)
	if err != nil || blocks != nil {
		return blocks, err
	}
	return m.prefixLocked(size, n)
}

// allocBatchLocked makes one all-or-nothing call and checks its answer.
// The blocks are m.blocks, valid until the next call to the memory.
func (m *Manager[K]) allocBatchLocked(size int64, n int) ([]allocator.Block, error) {
	m.flushLocked()
	m.stats.AllocCalls++
	blocks, err := m.mem.AppendBatch(m.blocks[:0], size, n, m.cfg.Placement)
	m.blocks = blocks[:0]
	if err != nil {
		return nil, err
	}
	if len(blocks) != n {
		m.freeLocked(blocks)
		return nil, fmt.Errorf("l1: memory returned %d blocks for a batch of %d", len(blocks), n)
	}
	if err := m.checkSizesLocked(blocks, size); err != nil {
		return nil, err
	}
	return blocks, nil
}

// checkSizesLocked checks that every block the memory returned holds
// size bytes; otherwise it gives the blocks back
// and errs, since a writer would write past the short one into its
// neighbour.
func (m *Manager[K]) checkSizesLocked(blocks []allocator.Block, size int64) error {
	for _, b := range blocks {
		if b.Size < size {
			m.freeLocked(blocks)
			return fmt.Errorf("l1: memory returned a block of %d bytes for objects of %d", b.Size, size)
		}
	}
	return nil
}

// freeLocked returns blocks the manager got but will not keep.
func (m *Manager[K]) freeLocked(blocks []allocator.Block) error {
	m.flushLocked()
	if len(blocks) == 0 {
		return nil
	}
	if err := m.mem.Free(blocks...); err != nil {
		m.stats.FreeErrors++
		m.lastFreeErr = err
		return fmt.Errorf("l1: free %d blocks: %w", len(blocks), err)
	}
	return nil
}
