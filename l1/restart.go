package l1

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// Leases across a restart: HoldLeases, Held and RestoreHeld.
//
// A daemon that hands its pool on (to a successor, or to systemd's fd
// store for the next daemon) ends every connection, but not the processes
// behind them: a writer between its reservation and its finish keeps
// copying into its mapping of the block, and a reader under a read lock
// keeps copying out of it, whichever daemon issued the lease. The rule of
// the quarantine (quarantine.go) holds across the restart: no block is
// reissued, evicted or freed while a lease on it may be live. So, before
// its Export, the daemon calls HoldLeases: every locked object's key is
// dropped (as a forced delete drops it: unreadable, EventRemoved with
// CauseDeleted, free to reserve again under a new block) and its block is
// held in the quarantine until its lease would have lapsed; Held lists the
// quarantine's blocks with the time each has left, and the successor's
// RestoreHeld puts them in its own quarantine, under leases of its own
// that nobody holds, to be freed when that time is up. A finished object
// under a read lock is not dropped: it stays read-locked (readable, not
// evictable; a forced delete holds its block) until its lock would have
// lapsed, and Export says for how long (Saved.ReadLeft), which Restore
// restores as a read lock of its own that nobody holds.
//
// A lease with no expiry (a lock under a TTL of NoExpiry, or a lapsed
// write quarantined under Config.QuarantineLapsedWrites, which waits for
// its owner) cannot wait for its owner across a restart: the owner's
// connection is gone, and with it the only call that would let the block
// go. HoldLeases holds such a block for bound from then on, then frees
// it: the one place where the manager trusts a bound over a lease, and
// the caller (kvallocd's -restart-hold) states it.

// HeldBlock is one quarantined block as Held lists it.
type HeldBlock struct {
	Block allocator.Block
	// Read: a read lease holds it; false for a write.
	Read bool
	// Left is the time until the lease lapses and the block is freed:
	// positive; NoExpiry for a lease that waits for its owner.
	Left time.Duration
}

// HoldLeases ends every lock the manager has granted as a restart ends
// them, without freeing a block: each write-locked object's key (and each
// read-locked temporary object's) is dropped, and its block held in the
// quarantine until the lock's expiry; a read-locked finished object stays
// read-locked until its lock's expiry; a lock or a quarantined write with
// no expiry is held for bound from now. It returns how many objects it
// dropped. The quarantine's entries it makes
// are released as a forced delete's are (AbortWrite, FinishWrite,
// FinishRead with the old lease), or at their lapse. After Close it
// returns ErrClosed; a negative bound is an error wrapping
// ErrInvalidArgument.
func (m *Manager[K]) HoldLeases(bound time.Duration) (int, error) {
	if bound < 0 {
		return 0, fmt.Errorf("%w: a negative hold %v", ErrInvalidArgument, bound)
	}
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return 0, ErrClosed
	}
	limit := satAdd(now, int64(bound))
	if limit >= endOfTime {
		limit = endOfTime - 1
	}
	until := func(expiry int64) int64 {
		if expiry >= endOfTime {
			return limit
		}
		return expiry
	}
	n := 0
	for _, o := range m.byRecencyLocked() {
		switch {
		case o.write.held(now):
			m.holdLocked(o.wlease, quarantined[K]{key: o.key, block: o.block, deleted: true, expiry: until(o.write.expiry)})
		case o.read.held(now) && o.temporary:
			m.holdLocked(o.rlease, quarantined[K]{key: o.key, block: o.block, deleted: true, read: true,
				count: o.read.count, expiry: until(o.read.expiry)})
		case o.read.held(now):
			// A finished object stays, read-locked until its lock
			// would have lapsed (Export says for how long).
			if o.read.expiry >= endOfTime {
				o.read.expiry = limit
				m.enqueueLocked(o, readQueue)
			}
			continue
		default:
			continue
		}
		m.forgetReportLocked(o, CauseDeleted)
		n++
	}
	next := int64(endOfTime)
	for l, q := range m.quarantine {
		if q.expiry >= endOfTime {
			q.expiry, q.deleted = limit, true
			m.quarantine[l] = q
		}
		next = min(next, q.expiry)
	}
	m.qnext = next
	return n, nil
}

// Held lists the quarantine's blocks, by offset, with the time each has
// left. After Close it returns ErrClosed.
func (m *Manager[K]) Held() ([]HeldBlock, error) {
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]HeldBlock, 0, len(m.quarantine))
	for _, q := range m.quarantine {
		left := NoExpiry
		if q.expiry < endOfTime {
			left = time.Duration(q.expiry - now)
		}
		out = append(out, HeldBlock{Block: q.block, Read: q.read, Left: left})
	}
	slices.SortFunc(out, func(a, b HeldBlock) int { return cmp.Compare(a.Block.Offset, b.Block.Offset) })
	return out, nil
}

// RestoreHeld is Restore with held blocks: mem holds the saved objects'
// blocks and the held ones live, and nothing else; each held block is put
// in the quarantine under a lease of the new manager's that nobody holds,
// counted in Stats.QuarantinedObjects and QuarantinedBytes, and freed when
// its Left is up (never, for NoExpiry: the caller bounds it). A held block
// that overlaps another, or whose Left is not positive, is an error
// wrapping ErrInvalidArgument.
func RestoreHeld[K comparable](mem Memory, cfg Config, saved []Saved[K], held []HeldBlock) (*Manager[K], error) {
	for i, h := range held {
		if h.Left <= 0 {
			return nil, fmt.Errorf("%w: restore: held block %d has %v left", ErrInvalidArgument, i, h.Left)
		}
		if h.Block.Size <= 0 || h.Block.Offset < 0 {
			return nil, fmt.Errorf("%w: restore: held block %d is %+v", ErrInvalidArgument, i, h.Block)
		}
	}
	return restore(mem, cfg, saved, held)
}
