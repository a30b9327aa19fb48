package reference

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
)

// This file models the L1 manager (package l1) as plainly as possible: a map
// of objects, each with a write-lock and a read-lock count and expiry, a use
// counter for LRU order, and an Alloc bitmap with the allocator's placement
// policy for memory. Every method is a direct transcription of the rules
// package l1's doc states; nothing is indexed or queued, so it is slow and
// easy to check by reading. It does not import package l1, so that a
// half-edited l1 never breaks the allocator's tests; its Status and Mode
// mirror l1's names and order, and tests compare them by value.
//
// The rules for late actors are here too, as plainly: every write reservation
// and every read epoch gets a lease from one counter, and a finishing call
// with another lease answers StaleLease and changes nothing; now+ttl
// saturates; the manager's time is the sum of the clock's forward steps, read
// at each call (observe); finished temporary objects are evictable; a re-lock
// keeps the object's temporary flag; after Close every call that names keys
// returns ErrClosed.
//
// Under ManagerConfig.Quarantine a lapsed write's key goes and its block
// stays taken, in a map by lease, until the lease comes back with its key
// to AbortWrite (OK), FinishWrite or FinishWriteAndReserveRead
// (WriteLapsed), which look there first, or until Close. Every lookup call
// counts its keys by kind (ManagerCounters.Lookups).

// Status mirrors l1.Status.
type Status uint8

// The statuses, in l1's order.
const (
	OK Status = iota
	KeyNotExist
	KeyNotReadable
	KeyNotWritable
	KeyInWrongState
	KeyIsLocked
	OutOfMemory
	StaleLease
	Skipped
	WriteLapsed
)

var statusNames = [...]string{"OK", "KEY_NOT_EXIST", "KEY_NOT_READABLE", "KEY_NOT_WRITABLE", "KEY_IN_WRONG_STATE", "KEY_IS_LOCKED", "OUT_OF_MEMORY", "STALE_LEASE", "SKIPPED", "WRITE_LAPSED"}

// String returns LMCache's name, as l1.Status.String does.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Mode mirrors l1.Mode.
type Mode uint8

// The modes, in l1's order.
const (
	ModeAll Mode = iota
	ModeNew
	ModeUpdate
)

// Errors the model returns where the manager must return an error wrapping
// l1.ErrInvalidArgument or l1.ErrClosed.
var (
	ErrInvalidArgument = errors.New("reference: invalid argument")
	ErrClosed          = errors.New("reference: closed")
)

// MaxReadLocks mirrors l1.MaxReadLocks.
const MaxReadLocks = 128

// Lease mirrors l1.Lease: one counter per manager, never 0.
type Lease uint64

// Result mirrors l1.Result.
type Result struct {
	Status Status
	Block  allocator.Block
	Lease  Lease
}

// ManagerConfig is the part of l1.Config the model needs, with defaults
// already applied.
type ManagerConfig struct {
	Placement     allocator.Placement
	AllOrNothing  bool // l1.PrefixNone
	EvictOnDemand bool
	// ReuseVictims: the manager runs over the allocator itself (no
	// wrapper), so on-demand eviction with Scattered placement hands the
	// batch, once the victims are chosen, each victim's block that is one
	// object's size and starts a whole number of objects into its free
	// run (allocator.Reissue; see evictFor).
	ReuseVictims bool
	Eviction     Policy
	WriteTTL     time.Duration
	ReadTTL      time.Duration
	// Quarantine is l1.Config.QuarantineLapsedWrites.
	Quarantine bool
}

// lock is a hold count and one expiry: LMCache's TTLLock. An expiry of
// math.MaxInt64 (a saturated now+ttl) is never reached: the model's time
// stops one nanosecond short of it (see Advance).
type lock struct {
	n      int64
	expiry time.Duration
}

// satAdd is a+b for b ≥ 0, saturated at math.MaxInt64.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func (l lock) held(now time.Duration) bool   { return l.n > 0 && now < l.expiry }
func (l lock) lapsed(now time.Duration) bool { return l.n > 0 && now >= l.expiry }

func (l *lock) take(n int, now, ttl time.Duration) {
	if !l.held(now) {
		l.n = 0
	}
	l.n += int64(n)
	l.expiry = satAdd(now, ttl)
}

func (l *lock) release(n int) {
	l.n = max(0, l.n-int64(n))
	if l.n == 0 {
		l.expiry = 0
	}
}

// ObjectModel is the model's record of one key.
type ObjectModel struct {
	Block     allocator.Block
	Size      int64
	Temporary bool
	Finished  bool
	write     lock
	read      lock
	used      uint64 // LRU: higher is more recent
	readSeq   uint64 // when the read lock was last taken: the read queue's order
	// The eviction policy's (policy.go).
	op    uint64 // the call of the last use
	Pos   uint32 // position in its chain, with the Partial bit
	enter uint64 // when it last joined the policy's set
	home  uint8  // S3-FIFO queue
	freq  uint8  // S3-FIFO use count
	inSet bool   // evictable as of the last reconciliation
	// WLease is the lease of the last write reservation, RLease the read
	// lock's epoch.
	WLease, RLease Lease
}

// ModelState mirrors l1.ObjectState, with expiries as the time each lock
// has left (zero when the lock is not held).
type ModelState struct {
	Block                   allocator.Block
	Size                    int64
	WriteLocked             bool
	ReadLocks               int
	Temporary               bool
	Finished                bool
	Evictable               bool
	WriteExpiry, ReadExpiry time.Duration
	WriteLease, ReadLease   Lease
}

// ModelEntry is one object of Snapshot.
type ModelEntry[K comparable] struct {
	Key K
	ModelState
}

// ManagerCounters mirrors the strategy-independent l1.Counters.
type ManagerCounters struct {
	WriteReservations, PartialGrants, FailedReservations, OOMKeys uint64
	Evictions, OnDemandEvictions, Expired, Quarantines            uint64
	// Lookups mirrors l1.Counters.Lookups, by l1.LookupKind.
	Lookups [NumLookupKinds]LookupCounts
}

// LookupKind mirrors l1.LookupKind.
type LookupKind uint8

// The lookup kinds, in l1's order.
const (
	LookupRead LookupKind = iota
	LookupReadPrefix
	LookupUnsafeRead
	LookupWrite
	NumLookupKinds
)

// LookupCounts mirrors l1.LookupCounts.
type LookupCounts struct {
	Calls, Hits, Misses, Skipped uint64
}

// count adds one call of kind k that looked up n keys: hits hits, the
// first miss misses (at most one for a prefix lookup), the rest skipped.
func (m *Manager[K]) count(k LookupKind, n, hits, misses int) {
	c := &m.Counters.Lookups[k]
	c.Calls++
	c.Hits += uint64(hits)
	c.Misses += uint64(misses)
	c.Skipped += uint64(n - hits - misses)
}

// Manager models l1.Manager over the memory model Mem.
type Manager[K comparable] struct {
	Mem      *Alloc
	Cfg      ManagerConfig
	Clock    time.Duration // the clock's reading, since the manager was made
	seen     time.Duration // the reading the last call saw
	Now      time.Duration // the manager's time: the clock's forward steps
	Counters ManagerCounters
	objects  map[K]*ObjectModel
	tick     uint64
	seq      uint64 // read locks taken
	opN      uint64 // calls so far (Sweeps, in fact: one or more per call)
	pol      policyState[K]
	gen      Lease
	closed   bool
	// quarantine holds the blocks of lapsed writes, by lease, under
	// Cfg.Quarantine: still taken in Mem, in no object.
	quarantine map[Lease]Quarantined[K]
}

// Quarantined is one lapsed write of the quarantine: its key and block.
type Quarantined[K comparable] struct {
	Key   K
	Block allocator.Block
}

// NewManager models a fresh manager over mem, which must model an empty
// allocator.
func NewManager[K comparable](mem *Alloc, cfg ManagerConfig) *Manager[K] {
	return &Manager[K]{Mem: mem, Cfg: cfg, objects: map[K]*ObjectModel{}, quarantine: map[Lease]Quarantined[K]{}}
}

// AddClock returns the clock reading c moved by d, either way, saturated
// at the int64 range of nanoseconds. l1check's clock moves the same way.
func AddClock(c, d time.Duration) time.Duration {
	next := c + d
	switch {
	case d > 0 && next < c:
		return math.MaxInt64
	case d < 0 && next > c:
		return math.MinInt64
	}
	return next
}

// Advance moves the clock by d, either way (see AddClock). The manager's
// time moves at the next call that reads the clock (see observe).
func (m *Manager[K]) Advance(d time.Duration) { m.Clock = AddClock(m.Clock, d) }

// observe is l1's tick: the manager's time moves by how far the clock moved
// forward since the last call read it, saturated, and stops one nanosecond
// short of math.MaxInt64, so a saturated expiry is never reached.
func (m *Manager[K]) observe() {
	if m.Clock > m.seen {
		step := m.Clock - m.seen
		if step < 0 { // the difference overflows: saturate, as time.Sub does
			step = math.MaxInt64
		}
		m.Now = min(satAdd(m.Now, step), math.MaxInt64-1)
	}
	m.seen = m.Clock
}

func (m *Manager[K]) nextLease() Lease { m.gen++; return m.gen }

// Object returns the model's record of key without sweeping, for tests
// that need to look before a call.
func (m *Manager[K]) Object(key K) (ObjectModel, bool) {
	o, ok := m.objects[key]
	if !ok {
		return ObjectModel{}, false
	}
	return *o, true
}

// Len is the number of objects without sweeping, like l1's Stats.Objects.
func (m *Manager[K]) Len() int { return len(m.objects) }

// Used is the bytes held by the objects' blocks, without sweeping, like
// l1's Usage.
func (m *Manager[K]) Used() int64 {
	var n int64
	for _, o := range m.objects {
		n += o.Block.Size
	}
	return n
}

// Quarantine returns the number of quarantined writes and their bytes,
// like l1's Stats.QuarantinedObjects and QuarantinedBytes.
func (m *Manager[K]) Quarantine() (objects int, bytes int64) {
	for _, q := range m.quarantine {
		bytes += q.Block.Size
	}
	return len(m.quarantine), bytes
}

// QuarantinedWrites returns the quarantine, by lease, without sweeping.
func (m *Manager[K]) QuarantinedWrites() map[Lease]Quarantined[K] { return maps.Clone(m.quarantine) }

// WriteLocked and TemporaryReadLocked count what l1's Stats reports
// without sweeping: objects with a write lock (lapsed or not) and
// temporary objects with read holds.
func (m *Manager[K]) WriteLocked() int {
	n := 0
	for _, o := range m.objects {
		if o.write.n > 0 {
			n++
		}
	}
	return n
}

// TemporaryReadLocked counts temporary objects with read holds, lapsed or
// not.
func (m *Manager[K]) TemporaryReadLocked() int {
	n := 0
	for _, o := range m.objects {
		if o.Temporary && o.read.n > 0 {
			n++
		}
	}
	return n
}

func (m *Manager[K]) touch(o *ObjectModel) { m.tick++; o.used, o.op = m.tick, m.opN }

// lru returns the keys, least recently used first.
func (m *Manager[K]) lru() []K {
	keys := make([]K, 0, len(m.objects))
	for k := range m.objects {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return cmp.Compare(m.objects[a].used, m.objects[b].used) })
	return keys
}

func (m *Manager[K]) remove(k K) {
	m.Mem.Release([]allocator.Block{m.objects[k].Block})
	delete(m.objects, k)
}

// Sweep reads the clock (see observe), then reclaims every object whose
// write lock lapsed and every temporary object whose read lock lapsed, and
// drops lapsed read holds of the rest. Every manager call but Stats and
// Usage begins with it. A dropped read lock counts as a release: the
// object becomes most recently used, the earliest expiry first, ties in
// the order the locks were last taken.
func (m *Manager[K]) Sweep() {
	m.syncPolicy() // the last call's changes, at the clock they saw
	m.observe()
	m.opN++
	defer m.syncPolicy()
	var lapsed []K
	for k, o := range m.objects {
		switch {
		case o.write.lapsed(m.Now) && m.Cfg.Quarantine:
			// The writer may still be writing: the key goes, the block
			// stays taken until the writer lets go.
			m.quarantine[o.WLease] = Quarantined[K]{k, o.Block}
			delete(m.objects, k)
			m.Counters.Expired++
			m.Counters.Quarantines++
		case o.write.lapsed(m.Now), o.Temporary && o.read.lapsed(m.Now):
			m.remove(k)
			m.Counters.Expired++
		case o.read.lapsed(m.Now):
			lapsed = append(lapsed, k)
		}
	}
	slices.SortFunc(lapsed, func(a, b K) int {
		oa, ob := m.objects[a], m.objects[b]
		return cmp.Or(cmp.Compare(oa.read.expiry, ob.read.expiry), cmp.Compare(oa.readSeq, ob.readSeq))
	})
	for _, k := range lapsed {
		o := m.objects[k]
		o.read = lock{}
		m.touch(o)
	}
}

// evictable is l1's predicate: finished, no live lock.
func (o *ObjectModel) evictable(now time.Duration) bool {
	return o.Finished && !o.write.held(now) && !o.read.held(now)
}

// State returns key's state after a sweep.
func (m *Manager[K]) State(key K) (ModelState, bool) {
	m.Sweep()
	o, ok := m.objects[key]
	if !ok {
		return ModelState{}, false
	}
	return m.state(o), true
}

func (m *Manager[K]) state(o *ObjectModel) ModelState {
	s := ModelState{Block: o.Block, Size: o.Size, Temporary: o.Temporary, Finished: o.Finished, Evictable: o.evictable(m.Now)}
	if o.write.held(m.Now) {
		s.WriteLocked, s.WriteExpiry, s.WriteLease = true, o.write.expiry-m.Now, o.WLease
	}
	if o.read.held(m.Now) {
		s.ReadLocks, s.ReadExpiry, s.ReadLease = int(o.read.n), o.read.expiry-m.Now, o.RLease
	}
	return s
}

// Snapshot returns every object after a sweep, least recently used first.
func (m *Manager[K]) Snapshot() []ModelEntry[K] {
	m.Sweep()
	out := []ModelEntry[K]{}
	for _, k := range m.lru() {
		out = append(out, ModelEntry[K]{k, m.state(m.objects[k])})
	}
	return out
}

// Need returns the indices of the keys ReserveWrite(keys, _, size, mode)
// would have to allocate now, after a sweep: first occurrences of missing
// keys, unless mode is ModeUpdate.
func (m *Manager[K]) Need(keys []K, mode Mode) []int {
	m.Sweep()
	var need []int
	first := firsts(keys)
	for i, k := range keys {
		if first[k] != i || mode == ModeUpdate {
			continue
		}
		if _, ok := m.objects[k]; !ok {
			need = append(need, i)
		}
	}
	return need
}

// ReserveWrite models l1.Manager.ReserveWrite.
func (m *Manager[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode Mode) ([]Result, error) {
	if size <= 0 || mode > ModeUpdate || len(temporary) != 0 && len(temporary) != len(keys) {
		return nil, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Result, len(keys))
	var need, relock []int
	first := firsts(keys)
	present := 0
	for i, k := range keys {
		o, exists := m.objects[k]
		if exists {
			present++ // a write-side hit: the key was there before the call
		}
		switch {
		case first[k] != i:
			out[i].Status = KeyNotWritable
		case !exists && mode == ModeUpdate, exists && mode == ModeNew:
			out[i].Status = KeyNotWritable
		case !exists:
			need = append(need, i)
		case o.write.held(m.Now) || o.read.held(m.Now) || o.Temporary || o.Block.Size < size:
			out[i].Status = KeyNotWritable
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
			panic("reference: planned blocks do not fit: " + err.Error())
		}
	}
	flag := func(i int) bool { return len(temporary) > 0 && temporary[i] }
	for j, i := range need {
		if j >= len(blocks) {
			out[i].Status = OutOfMemory
			continue
		}
		o := &ObjectModel{Block: blocks[j], Size: size, Temporary: flag(i), Pos: m.position(i)}
		m.objects[keys[i]] = o
		m.touch(o)
		o.WLease = m.nextLease()
		o.write.take(1, m.Now, m.Cfg.WriteTTL)
		out[i] = Result{OK, o.Block, o.WLease}
	}
	for _, i := range relock {
		o := m.objects[keys[i]]
		o.Size = size // a re-lock keeps the object's own temporary flag
		o.Pos = m.position(i)
		m.hit(o)
		m.touch(o)
		o.WLease = m.nextLease()
		o.write.take(1, m.Now, m.Cfg.WriteTTL)
		out[i] = Result{OK, o.Block, o.WLease}
	}
	m.Counters.WriteReservations += uint64(len(relock) + len(blocks))
	m.count(LookupWrite, len(keys), present, len(keys)-present)
	return out, nil
}

// allocate plans n objects of size bytes: all of them, or after on-demand
// eviction, or the largest prefix.
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

// evictFor evicts evictable objects not named in the request, least
// recently used first, until n objects fit. The check after each eviction
// is l1's: Fit when placement is not Contiguous, else a retry of the batch
// whenever free bytes would allow it. The victims are those of this plain
// loop whatever the memory, reused blocks or not.
func (m *Manager[K]) evictFor(size int64, n int, request map[K]int) ([]allocator.Block, bool) {
	useFit := m.Cfg.Placement != allocator.Contiguous
	reuse := m.Cfg.ReuseVictims && m.Cfg.Placement == allocator.Scattered
	var victims []allocator.Block
	var aside []s3Entry[K]
	defer func() { m.restore(aside) }()
	for {
		k, ok := m.victim(request, &aside)
		if !ok {
			break
		}
		victims = append(victims, m.objects[k].Block)
		m.evict(k)
		m.Counters.OnDemandEvictions++
		if useFit && m.Mem.MaxSlots(size, n) >= n {
			if reuse {
				return m.reuse(size, n, victims), true
			}
			break
		}
		if !useFit && m.Mem.FreeBytes()/size >= int64(n) {
			if bs, ok := m.Mem.PlanBatch(size, n, m.Cfg.Placement); ok {
				return bs, true
			}
		}
	}
	return m.Mem.PlanBatch(size, n, m.Cfg.Placement)
}

// reuse plans a scattered batch of n objects of size bytes after the
// victims, whose blocks are now free, made room for it, as l1 does with
// ReuseVictims: a victim's block that is one object's size and starts a
// whole number of objects into its free run, where carving the run from
// its front could put an object, goes to the batch as it is (at most n of
// them, in eviction order); the rest are planned over the free space
// without those blocks. Reuse never changes how many objects fit.
func (m *Manager[K]) reuse(size int64, n int, victims []allocator.Block) []allocator.Block {
	z := m.Mem.Units(size) * m.Mem.Align
	runs := m.Mem.Runs()
	var reused []allocator.Block
	for _, b := range victims {
		for _, x := range runs {
			start, end := x[0]*m.Mem.Align, (x[0]+x[1])*m.Mem.Align
			if b.Size == z && len(reused) < n && start <= b.Offset && b.Offset < end && (b.Offset-start)%z == 0 {
				reused = append(reused, b)
			}
		}
	}
	free := m.Mem.Clone()
	free.NoGen = true
	if err := free.Take(reused); err != nil {
		panic("reference: reused blocks overlap: " + err.Error())
	}
	rest, ok := free.PlanBatch(size, n-len(reused), allocator.Scattered)
	if !ok {
		panic("reference: reusing victims' blocks lost room")
	}
	out := append(reused, rest...)
	for i := range out {
		out[i].Gen = m.Mem.nextGen(i)
	}
	return out
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

func badLocks(locks int) bool { return locks < 1 || locks > MaxReadLocks }

func badLeases(keys int, leases []Lease) bool { return len(leases) != keys }

// FinishWrite models l1.Manager.FinishWrite.
func (m *Manager[K]) FinishWrite(keys []K, leases []Lease) ([]Status, error) {
	if badLeases(len(keys), leases) {
		return nil, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Status, len(keys))
	for i, k := range keys {
		o, ok := m.objects[k]
		switch {
		case m.unquarantine(k, leases[i]):
			out[i] = WriteLapsed
		case !ok:
			out[i] = KeyNotExist
		case !o.write.held(m.Now) || o.read.held(m.Now):
			out[i] = KeyInWrongState
		case o.WLease != leases[i]:
			out[i] = StaleLease
		default:
			o.write, o.Finished = lock{}, true
			m.touch(o)
		}
	}
	return out, nil
}

// readLockOne takes read holds, starting a new epoch when none was held.
func (m *Manager[K]) readLockOne(o *ObjectModel, locks int) {
	if !o.read.held(m.Now) {
		o.RLease = m.nextLease()
	}
	o.read.take(locks, m.Now, m.Cfg.ReadTTL)
	m.seq++
	o.readSeq = m.seq
}

// FinishWriteAndReserveRead models l1.Manager.FinishWriteAndReserveRead.
func (m *Manager[K]) FinishWriteAndReserveRead(keys []K, leases []Lease, locks int) ([]Result, error) {
	if badLocks(locks) || badLeases(len(keys), leases) {
		return nil, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Result, len(keys))
	for i, k := range keys {
		o, ok := m.objects[k]
		switch {
		case m.unquarantine(k, leases[i]):
			out[i].Status = WriteLapsed
		case !ok:
			out[i].Status = KeyNotExist
		case !o.write.held(m.Now) || o.read.held(m.Now):
			out[i].Status = KeyInWrongState
		case o.WLease != leases[i]:
			out[i].Status = StaleLease
		default:
			o.write, o.Finished = lock{}, true
			m.touch(o)
			m.readLockOne(o, locks)
			out[i] = Result{OK, o.Block, o.RLease}
		}
	}
	return out, nil
}

// unquarantine releases the quarantined write that lease l names, if it is
// key's, and reports whether there was one: the owner of a lapsed write
// lets go, whatever the key holds now.
func (m *Manager[K]) unquarantine(key K, l Lease) bool {
	q, ok := m.quarantine[l]
	if !ok || q.Key != key {
		return false
	}
	m.Mem.Release([]allocator.Block{q.Block})
	delete(m.quarantine, l)
	return true
}

// AbortWrite models l1.Manager.AbortWrite.
func (m *Manager[K]) AbortWrite(keys []K, leases []Lease) ([]Status, error) {
	if badLeases(len(keys), leases) {
		return nil, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Status, len(keys))
	for i, k := range keys {
		o, ok := m.objects[k]
		switch {
		case m.unquarantine(k, leases[i]):
			out[i] = OK
		case !ok:
			out[i] = KeyNotExist
		case !o.write.held(m.Now):
			out[i] = KeyInWrongState
		case o.WLease != leases[i]:
			out[i] = StaleLease
		default:
			m.remove(k)
		}
	}
	return out, nil
}

// ReserveRead models l1.Manager.ReserveRead.
func (m *Manager[K]) ReserveRead(keys []K, locks int) ([]Result, error) {
	if badLocks(locks) {
		return nil, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := m.readLock(keys, locks)
	hits := 0
	for _, r := range out {
		if r.Status == OK {
			hits++
		}
	}
	m.count(LookupRead, len(keys), hits, len(keys)-hits)
	return out, nil
}

// readLock read-locks every readable key, as ReserveRead does, after the
// sweep and without counting.
func (m *Manager[K]) readLock(keys []K, locks int) []Result {
	out := make([]Result, len(keys))
	for i, k := range keys {
		o, ok := m.objects[k]
		switch {
		case !ok:
			out[i].Status = KeyNotExist
		case o.write.held(m.Now):
			out[i].Status = KeyNotReadable
		default:
			m.readLockOne(o, locks)
			m.hit(o)
			m.touch(o)
			out[i] = Result{OK, o.Block, o.RLease}
		}
	}
	return out
}

// ReserveReadPrefix models l1.Manager.ReserveReadPrefix: ReserveRead of
// the keys up to the first that is missing or write-locked, which gets its
// status; every later key is Skipped and left alone.
func (m *Manager[K]) ReserveReadPrefix(keys []K, locks int) ([]Result, int, error) {
	if badLocks(locks) {
		return nil, 0, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return nil, 0, ErrClosed
	}
	out := make([]Result, len(keys))
	n := 0
	for ; n < len(keys); n++ {
		o, ok := m.objects[keys[n]]
		if !ok || o.write.held(m.Now) {
			break
		}
	}
	if n > 0 {
		copy(out, m.readLock(keys[:n], locks))
	}
	misses := 0
	if n < len(keys) {
		misses = 1
	}
	m.count(LookupReadPrefix, len(keys), n, misses)
	if n < len(keys) {
		out[n].Status = KeyNotReadable
		if _, ok := m.objects[keys[n]]; !ok {
			out[n].Status = KeyNotExist
		}
		for i := n + 1; i < len(keys); i++ {
			out[i].Status = Skipped
		}
	}
	return out, n, nil
}

// UnsafeRead models l1.Manager.UnsafeRead.
func (m *Manager[K]) UnsafeRead(keys []K) ([]Result, error) {
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Result, len(keys))
	hits := 0
	for i, k := range keys {
		o, ok := m.objects[k]
		switch {
		case !ok:
			out[i].Status = KeyNotExist
		case !o.read.held(m.Now) || o.write.held(m.Now):
			out[i].Status = KeyNotReadable
		default:
			out[i] = Result{OK, o.Block, o.RLease}
			hits++
		}
	}
	m.count(LookupUnsafeRead, len(keys), hits, len(keys)-hits)
	return out, nil
}

// FinishRead models l1.Manager.FinishRead.
func (m *Manager[K]) FinishRead(keys []K, leases []Lease, locks int) ([]Status, error) {
	if badLocks(locks) || badLeases(len(keys), leases) {
		return nil, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Status, len(keys))
	for i, k := range keys {
		o, ok := m.objects[k]
		switch {
		case !ok:
			out[i] = KeyNotExist
		case o.write.held(m.Now) || !o.read.held(m.Now):
			out[i] = KeyInWrongState
		case o.RLease != leases[i]:
			out[i] = StaleLease
		default:
			o.read.release(locks)
			if o.read.n == 0 && o.Temporary {
				m.remove(k)
			} else {
				m.touch(o) // a release counts as use
			}
		}
	}
	return out, nil
}

// Delete models l1.Manager.Delete.
func (m *Manager[K]) Delete(keys []K, force bool) ([]Status, error) {
	m.Sweep()
	if m.closed {
		return nil, ErrClosed
	}
	out := make([]Status, len(keys))
	for i, k := range keys {
		o, ok := m.objects[k]
		switch {
		case !ok:
			out[i] = KeyNotExist
		case !force && (o.write.held(m.Now) || o.read.held(m.Now)):
			out[i] = KeyIsLocked
		default:
			m.remove(k)
		}
	}
	return out, nil
}

// Clear models l1.Manager.Clear.
func (m *Manager[K]) Clear(force bool) int {
	m.Sweep()
	n := 0
	for _, k := range m.lru() {
		if o := m.objects[k]; force || !o.write.held(m.Now) && !o.read.held(m.Now) {
			m.remove(k)
			n++
		}
	}
	return n
}

// Close models l1.Manager.Close: it frees every object and the
// quarantine.
func (m *Manager[K]) Close() {
	m.Clear(true)
	for l, q := range m.quarantine {
		m.Mem.Release([]allocator.Block{q.Block})
		delete(m.quarantine, l)
	}
	m.closed = true
}

// Touch models l1.Manager.Touch.
func (m *Manager[K]) Touch(keys []K) error {
	m.Sweep()
	if m.closed {
		return ErrClosed
	}
	for _, k := range keys {
		if o, ok := m.objects[k]; ok {
			m.hit(o)
			m.touch(o)
		}
	}
	return nil
}

// IsEvictable models l1.Manager.IsEvictable.
func (m *Manager[K]) IsEvictable(key K) bool {
	m.Sweep()
	o, ok := m.objects[key]
	return ok && o.evictable(m.Now)
}

// EvictTo models l1.Manager.EvictTo.
func (m *Manager[K]) EvictTo(ratio float64) (int, error) {
	if !(ratio >= 0 && ratio <= 1) {
		return 0, ErrInvalidArgument
	}
	m.Sweep()
	if m.closed {
		return 0, ErrClosed
	}
	limit := ratio * float64(m.Mem.Capacity())
	n := 0
	for float64(m.Used()) > limit {
		k, ok := m.victim(nil, nil)
		if !ok {
			break
		}
		m.evict(k)
		n++
	}
	return n, nil
}

// Clone returns an independent copy of the model, memory included.
func (m *Manager[K]) Clone() *Manager[K] {
	c := *m
	c.Mem = m.Mem.Clone()
	c.objects = make(map[K]*ObjectModel, len(m.objects))
	for k, o := range m.objects {
		cp := *o
		c.objects[k] = &cp
	}
	c.quarantine = maps.Clone(m.quarantine)
	m.clonePolicy(&c)
	return &c
}
