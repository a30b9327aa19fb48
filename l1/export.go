package l1

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// Export and Restore: a manager's finished objects outliving its process.
//
// A daemon that restarts over the same memory (a memfd handed to its
// successor) keeps its objects' bytes; what it must carry over is the
// index: which key is in which block, and in what order the policy would
// evict them. Export lists exactly that; Restore builds a manager from the
// list over a memory that holds those blocks live and nothing else
// (allocator.Restore makes one).
//
// What survives: every finished object that is not write-locked (a
// rewrite in progress is the old object's end: its writer is gone), with
// its key, block, size, temporary flag, chain position (the Partial hint
// included), under S3-FIFO its queue and use count, and the time its read
// lock has left (Saved.ReadLeft), restored as a read lock nobody holds.
// What does not: the leases themselves (they belonged to connections, and
// a restored manager's leases begin again from 1: a daemon gives the new
// manager a new epoch, so no old lease can be presented), writes in
// progress, quarantined blocks (HoldLeases, Held and RestoreHeld carry
// them over: restart.go), read-locked temporary objects (they were to go
// at their release), the S3-FIFO ghost queue and the use stamps
// themselves.
// The order survives: Export lists the objects in the order the policy
// would evict them (per queue under S3-FIFO), the read-locked ones after
// the others, least recently used first, as if released in that order;
// Restore appends them in that order, so the restored manager's next
// victims are the old one's.

// Saved is one object of Export, in a form that holds no state of the
// process that made it.
type Saved[K comparable] struct {
	Key       K
	Block     allocator.Block
	Size      int64  // bytes asked for; at most Block.Size
	Pos       uint32 // the position in its prefix chain, Partial included
	Temporary bool
	// Small (S3-FIFO only): the object is in, or returns to, the small
	// queue; Freq is its use count, at most 3.
	Small bool
	Freq  uint8
	// ReadLeft, when positive, is how long the object stays read-locked
	// by readers the manager no longer knows (a restart's: restart.go):
	// Export reports a read lock's time left, NoExpiry for one that never
	// lapses; Restore read-locks the object for that long, under a lease
	// nobody holds.
	ReadLeft time.Duration
}

// Export returns the manager's finished objects that are not
// write-locked, in the order its policy would evict them, first victim
// first (see Saved and the comment above). It changes nothing but what
// any call does (expired locks are reclaimed first). After Close it
// returns ErrClosed.
func (m *Manager[K]) Export() ([]Saved[K], error) {
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Saved[K], 0, m.objects.n)
	save := func(o *object[K], small bool) {
		var left time.Duration
		if o.read.held(now) {
			left = NoExpiry
			if o.read.expiry < endOfTime {
				left = time.Duration(o.read.expiry - now)
			}
		}
		out = append(out, Saved[K]{Key: o.key, Block: o.block, Size: o.size, Pos: o.pos,
			Temporary: o.temporary, Small: small, Freq: o.freq, ReadLeft: left})
	}
	// The evictable objects, in the policy's order: S3-FIFO's small queue,
	// then its main queue; the one list of the others.
	for _, l := range []*list[K]{&m.ev.small, &m.ev.main} {
		for o := l.front(); o != nil; o = l.after(o) {
			save(o, l == &m.ev.small)
		}
	}
	// The rest: finished, not write-locked, so read-locked (or just
	// lapsed), least recently used first.
	var rest []*object[K]
	for _, sl := range m.objects.slots {
		if sl.rec == 0 {
			continue
		}
		o := m.objects.rec(sl.rec)
		if o.evq != evNone || !o.finished || o.write.held(now) || (o.temporary && o.read.held(now)) {
			continue
		}
		rest = append(rest, o)
	}
	slices.SortFunc(rest, func(a, b *object[K]) int { return cmp.Compare(a.used, b.used) })
	for _, o := range rest {
		save(o, m.cfg.Eviction == EvictS3FIFO && o.home != evMain)
	}
	return out, nil
}

// Restore returns a manager over mem holding the saved objects, as
// Export listed them, in that eviction order, none locked. mem must hold
// exactly the saved blocks live and nothing else (allocator.Restore over a
// fresh allocator makes such a memory): Restore checks that the bytes mem
// reports used are the blocks' sum, and that no two blocks overlap.
//
// A list that could not have come from Export (a key twice, a size of 0 or
// above its block, a block not aligned to mem's Align, a use count above
// 3, a small-queue object under another policy than S3-FIFO) or that
// disagrees with mem is an error wrapping ErrInvalidArgument, and no
// manager is returned. The manager's own checks (Verify's invariants) run
// once over the result.
func Restore[K comparable](mem Memory, cfg Config, saved []Saved[K]) (*Manager[K], error) {
	return restore(mem, cfg, saved, nil)
}

// restore is Restore and RestoreHeld (restart.go).
func restore[K comparable](mem Memory, cfg Config, saved []Saved[K], held []HeldBlock) (*Manager[K], error) {
	m, err := New[K](mem, cfg)
	if err != nil {
		return nil, err
	}
	bad := func(i int, format string, a ...any) (*Manager[K], error) {
		return nil, fmt.Errorf("%w: restore: object %d: %s", ErrInvalidArgument, i, fmt.Sprintf(format, a...))
	}
	var sum int64
	blocks := make([]allocator.Block, 0, len(saved))
	seen := make(map[K]struct{}, len(saved))
	for i := range saved {
		s := &saved[i]
		switch {
		case s.Size <= 0 || s.Size > s.Block.Size:
			return bad(i, "size %d does not fit its block of %d bytes", s.Size, s.Block.Size)
		case s.Block.Offset < 0 || s.Block.Offset%m.align != 0 || s.Block.Size%m.align != 0:
			return bad(i, "block %+v is not aligned to %d", s.Block, m.align)
		case s.Freq > maxFreq:
			return bad(i, "use count %d above %d", s.Freq, maxFreq)
		case s.Small && m.cfg.Eviction != EvictS3FIFO:
			return bad(i, "in S3-FIFO's small queue under policy %v", m.cfg.Eviction)
		case s.ReadLeft < 0:
			return bad(i, "read-locked for %v", s.ReadLeft)
		}
		if _, dup := seen[s.Key]; dup {
			return bad(i, "its key %v is saved twice", s.Key)
		}
		seen[s.Key] = struct{}{}
		sum += s.Block.Size
		blocks = append(blocks, s.Block)
	}
	for i, h := range held {
		if h.Block.Offset%m.align != 0 || h.Block.Size%m.align != 0 {
			return nil, fmt.Errorf("%w: restore: held block %d, %+v, is not aligned to %d", ErrInvalidArgument, i, h.Block, m.align)
		}
		sum += h.Block.Size
		blocks = append(blocks, h.Block)
	}
	if err := verifyBlocks(blocks); err != nil {
		return nil, fmt.Errorf("%w: restore: %w", ErrInvalidArgument, err)
	}
	if used := mem.Stats().Used; used != sum {
		return nil, fmt.Errorf("%w: restore: the memory has %d bytes in use, the objects' and held blocks %d", ErrInvalidArgument, used, sum)
	}
	now := m.lock()
	defer m.unlock()
	for _, h := range held {
		q := quarantined[K]{block: h.Block, deleted: true, expiry: endOfTime}
		if h.Left != NoExpiry {
			q.expiry = satAdd(now, int64(h.Left))
		}
		if h.Read {
			q.read, q.count = true, 1
		}
		m.holdLocked(m.nextLease(), q)
	}
	for i := range saved {
		s := &saved[i]
		o := m.objects.alloc()
		o.key = s.Key
		o.hash = m.objects.hash(&o.key)
		_, pos := m.objects.find(&o.key, o.hash)
		m.objects.insert(o, pos)
		o.finished, o.temporary = true, s.Temporary
		o.block, o.size, o.pos, o.freq = s.Block, s.Size, s.Pos, s.Freq
		m.held += s.Block.Size
		m.useLocked(o)
		m.ev.n++
		q := evMain
		if s.Small {
			q = evSmall
		}
		if m.cfg.Eviction == EvictS3FIFO {
			o.home = q
		}
		m.ev.link(o, q)
	}
	// Read locks the restart carried over: readable, not evictable, until
	// they lapse.
	for i := range saved {
		if left := saved[i].ReadLeft; left > 0 {
			o, _ := m.objects.find(&saved[i].Key, m.objects.hash(&saved[i].Key))
			m.readLockLocked(o, 1, now)
			o.read.expiry = endOfTime
			if left != NoExpiry {
				o.read.expiry = satAdd(now, int64(left))
			}
			if o.temporary {
				m.enqueueLocked(o, tempQueue)
			} else {
				m.enqueueLocked(o, readQueue)
			}
			m.syncEvictLocked(o, now)
		}
	}
	// Everything restored is settled: nothing is the current operation's
	// to rank (the prefix policy's anchor is the list's tail).
	m.ev.anchor, m.ev.ranked, m.ev.dirty = m.ev.main.tail, m.ev.ranked[:0], false
	if err := m.verifyLocked(); err != nil {
		return nil, fmt.Errorf("%w: restore left an inconsistent manager: %w", ErrInvalidArgument, err)
	}
	return m, nil
}
