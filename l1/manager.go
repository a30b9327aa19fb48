package l1

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// object is the manager's record of one key: the key, then the rest,
// which holds no pointers (see store.go). For ObjectKey it is 192 bytes,
// three cache lines (TestObjectLayout).
type object[K comparable] struct {
	key K
	meta
}

// meta is what the manager keeps about an object besides its key. It holds
// no pointers, so resetting it (store.release) is a plain clear, without
// the garbage collector's write barriers.
type meta struct {
	live      bool    // in the index
	queue     queueID // the expiry queue holding the object
	temporary bool
	finished  bool // a write of this object has been finished

	// The eviction policy's fields (see policy.go).
	evq, home evQueue // the policy list holding it; S3-FIFO's queue
	freq      uint8   // S3-FIFO's use count
	pos       uint32  // position in its prefix chain (ReserveWriteChain)

	hash uint32 // the index's hash of key (see store.go)
	idx  int32  // the record's number
	evl  links  // the policy's list (see lru.go); the store's free list
	// qseq counts the record's entries in expiry queues, across reuse: an
	// entry whose number is not the record's is stale (see expiry.go).
	qseq uint32
	// rank orders, for the prefix policy, the objects of one position that
	// the current operation made recent: it counts their entries into the
	// policy's list (see evictSet.settle).
	rank uint32

	write ttlLock
	read  ttlLock
	// wlease is the lease of the write reservation that holds (or last
	// held) the write lock; rlease is the read-lock epoch (see Lease).
	wlease, rlease Lease
	// stamp is the Manager.stamp of the last ReserveWrite that named the
	// key: within one call it marks the keys already seen (see reserve.go).
	stamp uint64
	// used is the Manager.clock of the object's last use: Snapshot's
	// order, least recently used first (see recency.go).
	used uint64

	block allocator.Block
	size  int64 // bytes asked for by the last ReserveWrite
}

// queueID names an expiry queue (see expiry.go).
type queueID uint8

const (
	noQueue queueID = iota
	writeQueue
	tempQueue
	readQueue
)

// Manager keeps one object per key over a Memory and hands out read and
// write locks on them. It is safe for concurrent use: every method runs
// under one mutex, and listeners run outside it (see Listener).
type Manager[K comparable] struct {
	mem  Memory
	cfg  Config
	wttl int64 // nanoseconds
	rttl int64

	mu      sync.Mutex
	objects store[K] // the records, and the index from keys to them
	clock   uint64   // uses so far (see object.used)
	// The expiry queues (expiry.go), by queueID: write-locked objects by
	// write expiry, read-locked temporary objects and other read-locked
	// objects by read expiry.
	queues      [readQueue + 1]expQueue
	ev          evictSet[K]
	align       int64    // mem.Align(), read once at New
	capacity    int64    // mem.Capacity(), read once at New
	runs        freeRuns // on-demand eviction's scratch (see evict.go)
	closed      bool
	stats       Counters
	held        int64 // bytes in the objects' blocks
	lastFreeErr error
	// The manager's time (see tick): now is nanoseconds since New, last
	// the clock's last reading, base the reading at time 0.
	now        int64
	last, base time.Time
	gen        uint64 // the last lease handed out

	// Scratch space, reused under the lock so that the hot paths allocate
	// little beyond the slices they return.
	stamp   uint64            // ReserveWrite calls so far (see object.stamp)
	pending []allocator.Block // blocks of removed objects, not yet freed
	blocks  []allocator.Block // blocks from the memory, for the current call
	reused  []allocator.Block // on-demand eviction's victims' blocks to reissue
	picks   []pick            // ReserveWrite's keys to allocate
	relocks []pick            // ReserveWrite's keys to re-lock
	past    pastSet           // ReserveWrite's missing keys past the room (room.go)
	hints   hints             // the records the last calls found (hint.go)
	// leaseRecs: the record each recent lease was handed out for, by the
	// lease's low bits (hint.go); nil until the first lease.
	leaseRecs []int32

	listeners []Listener[K]
	delivery  delivery[K] // events waiting for delivery (see listener.go)

	// quarantine holds, by lease, the blocks of lapsed writes and of keys
	// deleted under live locks, and qbytes their bytes (see
	// quarantine.go); nil until the first.
	// qnext is the earliest expiry of a held lease in it, endOfTime when
	// none lapses.
	quarantine map[Lease]quarantined[K]
	qbytes     int64
	qnext      int64
}

// New returns a manager over mem. The manager does not own mem: Close frees
// the manager's blocks but leaves mem open. A nil mem, an unknown
// placement or policy, a negative TTL, and a memory whose Align is not
// positive or whose Capacity is below the capacity its Stats report are
// rejected with an error wrapping ErrInvalidArgument.
func New[K comparable](mem Memory, cfg Config) (*Manager[K], error) {
	if isNil(mem) {
		return nil, fmt.Errorf("%w: nil memory (%T)", ErrInvalidArgument, mem)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager[K]{
		mem:      mem,
		cfg:      cfg,
		last:     cfg.Now(),
		wttl:     int64(cfg.WriteTTL),
		rttl:     int64(cfg.ReadTTL),
		align:    mem.Align(),
		capacity: mem.Capacity(),
		qnext:    endOfTime,
	}
	if m.align <= 0 {
		return nil, fmt.Errorf("%w: memory alignment %d must be positive (%T)", ErrInvalidArgument, m.align, mem)
	}
	if usable := mem.Stats().Capacity; usable < 0 || m.capacity < usable {
		return nil, fmt.Errorf("%w: memory capacity %d, but %d usable now (%T)", ErrInvalidArgument, m.capacity, usable, mem)
	}
	m.base = m.last
	m.objects.init()
	m.ev.init(&m.objects, cfg.Eviction)
	m.delivery.init(&m.mu)
	return m, nil
}

// isNil reports whether mem is nil or a nil pointer, map, slice, func or
// channel wrapped in the interface, such as a typed-nil *allocator.Allocator.
func isNil(mem Memory) bool {
	if mem == nil {
		return true
	}
	switch v := reflect.ValueOf(mem); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// nextLease hands out the next lease.
func (m *Manager[K]) nextLease() Lease {
	m.gen++
	return Lease(m.gen)
}

// Config returns the configuration in force, defaults filled in.
func (m *Manager[K]) Config() Config { return m.cfg }

// lock begins an operation: it takes the manager lock, reads the clock and
// reclaims expired objects. It returns the time in manager nanoseconds.
func (m *Manager[K]) lock() int64 {
	m.mu.Lock()
	m.delivery.begin()
	m.ev.begin()
	now := m.tick()
	m.sweepLocked(now)
	return now
}

// removeLocked drops o: frees its block, forgets its key and reports it. A
// block the memory refuses to free is counted in Stats.FreeErrors; the key
// is dropped all the same.
func (m *Manager[K]) removeLocked(o *object[K], cause Cause) {
	m.pending = append(m.pending, o.block)
	m.forgetReportLocked(o, cause)
}

// forgetReportLocked is forgetLocked, then the removal's event.
func (m *Manager[K]) forgetReportLocked(o *object[K], cause Cause) {
	if !m.listening() {
		m.forgetLocked(o, cause)
		return
	}
	key := o.key
	m.forgetLocked(o, cause)
	m.noteRemovedLocked(key, cause)
}

// dropLocked is removeLocked without the event, for callers that report the
// removal after another event of the same operation. The block joins
// m.pending, freed by flushLocked before the manager next calls its memory
// or releases its lock; o is zeroed for reuse.
func (m *Manager[K]) dropLocked(o *object[K], cause Cause) {
	m.pending = append(m.pending, o.block)
	m.forgetLocked(o, cause)
}

// forgetLocked is dropLocked without freeing o's block: it takes o out of
// every queue, list and the index, counts the removal and zeroes o.
func (m *Manager[K]) forgetLocked(o *object[K], cause Cause) {
	m.dequeueLocked(o)
	if o.evq != evNone {
		m.ev.leave(o)
	}
	m.objects.remove(o)
	m.held -= o.block.Size
	switch cause {
	case CauseExpired, CauseQuarantined:
		m.stats.Expired++
	case CauseEvicted:
		m.stats.Evictions++
	}
	m.objects.release(o)
}

// flushLocked frees the blocks of the objects removed since the last flush,
// in one Free call. When that fails it frees them one at a time, so that
// one block the memory refuses does not keep the others, and counts each
// refusal in Stats.FreeErrors, as a Free per object would have.
func (m *Manager[K]) flushLocked() {
	bs := m.pending
	if len(bs) == 0 {
		return
	}
	m.pending = bs[:0]
	err := m.mem.Free(bs...)
	if err == nil {
		return
	}
	if len(bs) == 1 {
		m.stats.FreeErrors++
		m.lastFreeErr = err
		return
	}
	for i := range bs {
		if err := m.mem.Free(bs[i : i+1]...); err != nil {
			m.stats.FreeErrors++
			m.lastFreeErr = err
		}
	}
}

// Delete removes the keys and frees their memory. Without force a locked
// object is left alone (KeyIsLocked). With force it is removed anyway: the
// key is gone at once (KeyNotExist to every later lookup, writable again
// under a new block), but the block of an object under a live lock is not
// freed until the lock's holders let go of it (see quarantine.go): a
// writer's AbortWrite answers OK and its FinishWrite WriteDeleted, each
// freeing the block; readers' FinishRead calls answer OK, and the last
// frees it; a lapse of the lock frees it too. LMCache freed it at once,
// and the holder then raced with the block's next owner. After Close it
// returns ErrClosed.
func (m *Manager[K]) Delete(keys []K, force bool) ([]Status, error) {
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Status, len(keys))
	m.beginHints(len(keys))
	for i := range keys {
		o := m.lookupAtLocked(i, &keys[i], now)
		switch {
		case o == nil:
			out[i] = KeyNotExist
		case !force && (o.write.held(now) || o.read.held(now)):
			out[i] = KeyIsLocked
		default:
			m.deleteLocked(o, CauseDeleted, now)
			m.setHint(i, nil)
		}
	}
	return out, nil
}

// Clear removes every unlocked object, or every object with force, and
// returns how many it removed. Expired objects are reclaimed first (and not
// counted). With force, a locked object's block waits for its holders, as
// for Delete.
func (m *Manager[K]) Clear(force bool) int {
	now := m.lock()
	defer m.unlock()
	return m.clearLocked(now, force)
}

func (m *Manager[K]) clearLocked(now int64, force bool) int {
	n := 0
	for _, o := range m.byRecencyLocked() {
		if force || (!o.write.held(now) && !o.read.held(now)) {
			m.deleteLocked(o, CauseCleared, now)
			n++
		}
	}
	return n
}

// Close frees every object, locked or not, and every quarantined block
// (see Config.QuarantineLapsedWrites). Every later call that names keys
// or changes anything (ReserveWrite, FinishWrite, FinishWriteAndReserveRead,
// AbortWrite, ReserveRead, UnsafeRead, FinishRead, Delete, Touch, EvictTo)
// then fails with ErrClosed, so "closed" never looks like a miss; the
// observers (State, Snapshot, IsEvictable, Len, Clear, Stats, Usage) see an
// empty manager. It leaves the Memory open. It is idempotent. The error
// reports blocks the memory refused to free.
func (m *Manager[K]) Close() error {
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return nil
	}
	before := m.stats.FreeErrors
	m.clearLocked(now, true)
	m.releaseAllQuarantinedLocked()
	m.flushLocked()
	m.closed = true
	// Let the collector have the records and scratch space.
	m.objects.reset()
	m.ev.reset()
	m.pending, m.blocks, m.reused, m.picks, m.relocks = nil, nil, nil, nil, nil
	for i := range m.queues {
		m.queues[i].reset()
	}
	m.hints = hints{}
	m.leaseRecs = nil
	if n := m.stats.FreeErrors - before; n > 0 {
		return fmt.Errorf("l1: close: %d blocks not freed: %w", n, m.lastFreeErr)
	}
	return nil
}

// Touch marks the existing keys as recently used and reports them
// (EventAccessed). Missing keys are ignored. After Close it returns
// ErrClosed.
func (m *Manager[K]) Touch(keys []K) error {
	now := m.lock()
	defer m.unlock()
	if m.closed {
		return ErrClosed
	}
	var touched []K
	m.beginHints(len(keys))
	for i := range keys {
		if o := m.lookupAtLocked(i, &keys[i], now); o != nil {
			m.touchLocked(o, true)
			if m.listening() {
				touched = append(touched, keys[i])
			}
		}
	}
	m.emitLocked(EventAccessed, touched)
	return nil
}

// Len returns the number of objects, after reclaiming expired ones.
func (m *Manager[K]) Len() int {
	m.lock()
	defer m.unlock()
	return m.objects.n
}

// isOOM reports whether an allocator error means "does not fit".
func isOOM(err error) bool { return errors.Is(err, allocator.ErrOutOfMemory) }
