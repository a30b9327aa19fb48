package l1ref

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
	"github.com/kvalloc/kvalloc/l1"
)

// Config is the manager's configuration as the model reads it: l1.Config
// with its defaults applied (both TTLs set; Now is not read: the model's
// clock moves by Advance), the prefix strategy's one difference, and the
// clock's reading when the manager was made.
type Config struct {
	l1.Config
	// AllOrNothing is the all-or-nothing baseline (baseline.None): a
	// batch that does not fit whole gets nothing.
	AllOrNothing bool
	// Epoch is the clock's reading at New: State reports expiries as
	// times from it, as l1 does from its clock.
	Epoch time.Time
}

// Manager models l1.Manager over the memory model Mem.
type Manager[K comparable] struct {
	Mem   *allocref.Alloc
	Cfg   Config
	Clock time.Duration // the clock's reading, since Cfg.Epoch
	seen  time.Duration // the reading the last call saw
	Now   time.Duration // the manager's time: the clock's forward steps
	// Counters are the manager's counters the model keeps (see Counted).
	Counters l1.Counters
	objects  map[K]*object
	tick     uint64 // uses so far
	seq      uint64 // read locks taken
	opN      uint64 // calls so far (Sweeps, in fact: one or more per call)
	pol      policyState[K]
	gen      l1.Lease
	closed   bool
	// quarantine holds, by lease, the blocks of lapsed writes (under
	// Cfg.QuarantineLapsedWrites) and of keys deleted with force under a
	// live lock: still taken in Mem, in no object.
	quarantine map[l1.Lease]Quarantined[K]
}

// object is the model's record of one key.
type object struct {
	block     allocator.Block
	size      int64
	temporary bool
	finished  bool
	write     lock
	read      lock
	used      uint64 // LRU: higher is more recent
	readSeq   uint64 // when the read lock was last taken: the read queue's order
	// The eviction policy's (policy.go).
	op    uint64 // the call of the last use
	pos   uint32 // position in its chain, with the l1.Partial bit
	enter uint64 // when it last joined the policy's set
	home  uint8  // S3-FIFO queue
	freq  uint8  // S3-FIFO use count
	inSet bool   // evictable as of the last reconciliation
	// wlease is the lease of the last write reservation, rlease the read
	// lock's epoch.
	wlease, rlease l1.Lease
}

// Quarantined is one held block of the quarantine: its key and block, and
// what holds it. A lapsed write waits for its owner for ever (Expiry
// math.MaxInt64); a deleted key's lease until its holders let go or its
// lock's expiry.
type Quarantined[K comparable] struct {
	Key   K
	Block allocator.Block
	// Deleted: the key was deleted with force under a live lock.
	Deleted bool
	// Read: a read lease with Count holds left; otherwise a write's.
	Read   bool
	Count  int64
	Expiry time.Duration
}

// New models a fresh manager over mem, which must model an empty
// allocator. It turns mem's generations off (allocref.Alloc.NoGen): a
// client of the allocator cannot predict them (a baseline's probes
// consume generations), so the model's blocks carry none.
func New[K comparable](mem *allocref.Alloc, cfg Config) *Manager[K] {
	mem.NoGen = true
	return &Manager[K]{Mem: mem, Cfg: cfg, objects: map[K]*object{}, quarantine: map[l1.Lease]Quarantined[K]{}}
}

func (m *Manager[K]) nextLease() l1.Lease { m.gen++; return m.gen }

// touch makes o the most recently used, in the current call.
func (m *Manager[K]) touch(o *object) { m.tick++; o.used, o.op = m.tick, m.opN }

// lru returns the keys, least recently used first.
func (m *Manager[K]) lru() []K {
	keys := slices.Collect(maps.Keys(m.objects))
	slices.SortFunc(keys, func(a, b K) int { return cmp.Compare(m.objects[a].used, m.objects[b].used) })
	return keys
}

// remove drops k and frees its block.
func (m *Manager[K]) remove(k K) {
	m.Mem.Release([]allocator.Block{m.objects[k].block})
	delete(m.objects, k)
}

// Clone returns an independent copy of the model, memory included.
func (m *Manager[K]) Clone() *Manager[K] {
	c := *m
	c.Mem = m.Mem.Clone()
	c.objects = make(map[K]*object, len(m.objects))
	for k, o := range m.objects {
		cp := *o
		c.objects[k] = &cp
	}
	c.quarantine = maps.Clone(m.quarantine)
	m.clonePolicy(&c)
	return &c
}
