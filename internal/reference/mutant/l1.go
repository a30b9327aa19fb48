package mutant

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// OOMMiddle gives OutOfMemory to the middle one of the keys a ReserveWrite
// newly allocated (when it allocated at least three): it aborts that key's
// reservation and reports it out of memory, so the granted keys are no
// longer a prefix.
type OOMMiddle[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite reserves, then takes back the middle new key.
func (m OOMMiddle[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	existed := make([]bool, len(keys))
	for i, k := range keys {
		_, existed[i] = m.State(k)
	}
	res, err := m.Manager.ReserveWrite(keys, temporary, size, mode)
	if err != nil {
		return res, err
	}
	var fresh []int
	for i, r := range res {
		if r.Status == l1.OK && !existed[i] {
			fresh = append(fresh, i)
		}
	}
	if len(fresh) >= 3 {
		i := fresh[len(fresh)/2]
		_, _ = m.AbortWrite([]K{keys[i]}, []l1.Lease{res[i].Lease})
		res[i] = l1.Result{Status: l1.OutOfMemory}
	}
	return res, nil
}

// RepeatAllocTwice allocates a second block for every repeated occurrence
// of a key in a successful ReserveWrite and drops it, as LMCache did: the
// second buffer overwrote the first in its map and one of them leaked.
type RepeatAllocTwice[K comparable] struct {
	*l1.Manager[K]
	Mem       l1.Memory
	Placement allocator.Placement
}

// ReserveWrite reserves, then leaks one block per repeated key.
func (m RepeatAllocTwice[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	res, err := m.Manager.ReserveWrite(keys, temporary, size, mode)
	if err != nil {
		return res, err
	}
	for i, k := range keys {
		if slices.Index(keys, k) != i {
			_, _ = m.Mem.AppendBatch(nil, size, 1, m.Placement)
		}
	}
	return res, nil
}

// ReversedPrefix grants the largest suffix instead of the largest prefix:
// it reserves the keys in reverse order and reverses the answer back.
type ReversedPrefix[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite reserves keys back to front.
func (m ReversedPrefix[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	rk, rt := slices.Clone(keys), slices.Clone(temporary)
	slices.Reverse(rk)
	slices.Reverse(rt)
	res, err := m.Manager.ReserveWrite(rk, rt, size, mode)
	slices.Reverse(res)
	return res, err
}

// TailNotWritable answers KeyNotWritable instead of OutOfMemory for the
// tail after a partial grant: the caller cannot tell "no room" from "not
// allowed".
type TailNotWritable[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite relabels every OutOfMemory.
func (m TailNotWritable[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	res, err := m.Manager.ReserveWrite(keys, temporary, size, mode)
	for i := range res {
		if res[i].Status == l1.OutOfMemory {
			res[i].Status = l1.KeyNotWritable
		}
	}
	return res, err
}

// TruncateFlags handles a temporary slice of the wrong length as Python's
// zip(strict=False) does: it silently reserves only as many keys as there
// are flags (LMCache's bug), instead of rejecting the call.
type TruncateFlags[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite truncates to the shorter of keys and temporary.
func (m TruncateFlags[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	if len(temporary) == 0 || len(temporary) == len(keys) {
		return m.Manager.ReserveWrite(keys, temporary, size, mode)
	}
	n := min(len(keys), len(temporary))
	res, err := m.Manager.ReserveWrite(keys[:n], temporary[:n], size, mode)
	if err != nil {
		return res, err
	}
	for len(res) < len(keys) {
		res = append(res, l1.Result{Status: l1.KeyNotWritable})
	}
	return res, nil
}

// LeasesIgnored accepts any lease: each finishing call presents the
// current holder's lease instead of the caller's, as a manager whose locks
// have no owner does. A late writer then commits (or aborts) another
// writer's reservation, and a late reader releases holds taken after its
// own lapsed.
type LeasesIgnored[K comparable] struct{ *l1.Manager[K] }

// current returns the holders' leases of keys, write or read.
func (m LeasesIgnored[K]) current(keys []K, leases []l1.Lease, write bool) []l1.Lease {
	if len(leases) != len(keys) {
		return leases // still rejected
	}
	out := make([]l1.Lease, len(keys))
	for i, k := range keys {
		s, _ := m.State(k)
		out[i] = s.ReadLease
		if write {
			out[i] = s.WriteLease
		}
	}
	return out
}

// FinishWrite commits whoever holds the lock.
func (m LeasesIgnored[K]) FinishWrite(keys []K, leases []l1.Lease) ([]l1.Status, error) {
	return m.Manager.FinishWrite(keys, m.current(keys, leases, true))
}

// AbortWrite aborts whoever holds the lock.
func (m LeasesIgnored[K]) AbortWrite(keys []K, leases []l1.Lease) ([]l1.Status, error) {
	return m.Manager.AbortWrite(keys, m.current(keys, leases, true))
}

// FinishWriteAndReserveRead commits whoever holds the lock.
func (m LeasesIgnored[K]) FinishWriteAndReserveRead(keys []K, leases []l1.Lease, locks int) ([]l1.Result, error) {
	return m.Manager.FinishWriteAndReserveRead(keys, m.current(keys, leases, true), locks)
}

// FinishRead releases whoever holds the lock.
func (m LeasesIgnored[K]) FinishRead(keys []K, leases []l1.Lease, locks int) ([]l1.Status, error) {
	return m.Manager.FinishRead(keys, m.current(keys, leases, false), locks)
}

// TTLOverflow configures a manager as an unsaturated now+ttl would run it:
// a TTL so long that now+ttl overflows wraps the expiry into the past, so
// the lock lapses at once. Here a TTL of a century or more becomes 1 ns,
// which lapses at the next tick of the clock.
func TTLOverflow(c *l1.Config) {
	const century = 100 * 365 * 24 * time.Hour
	if c.WriteTTL >= century {
		c.WriteTTL = time.Nanosecond
	}
	if c.ReadTTL >= century {
		c.ReadTTL = time.Nanosecond
	}
}

// SharedKeys hands every listener the same Event.Keys slice: listeners
// registered through it share one underlying listener, so a listener that
// modifies its keys changes what the next one sees.
type SharedKeys[K comparable] struct {
	*l1.Manager[K]
	fns *[]func(l1.Event[K])
}

// NewSharedKeys wraps m.
func NewSharedKeys[K comparable](m *l1.Manager[K]) SharedKeys[K] {
	fns := &[]func(l1.Event[K]){}
	m.AddListenerFunc(func(e l1.Event[K]) {
		for _, f := range *fns {
			f(e)
		}
	})
	return SharedKeys[K]{Manager: m, fns: fns}
}

// AddListenerFunc adds f to the shared listener. Not safe for concurrent
// use with operations (tests add listeners first).
func (m SharedKeys[K]) AddListenerFunc(f func(l1.Event[K])) { *m.fns = append(*m.fns, f) }

// UnboundedDelivery delivers events the way the manager did before each
// caller delivered its own events: callers hand their events to a queue and
// return at once, and one goroutine delivers them, however far behind it
// falls. Listeners registered through it get the manager's events through
// that queue.
type UnboundedDelivery[K comparable] struct {
	*l1.Manager[K]
	q *eventQueue[K]
}

type eventQueue[K comparable] struct {
	mu      sync.Mutex
	cond    *sync.Cond
	events  []l1.Event[K]
	fns     []func(l1.Event[K])
	running bool
}

// NewUnboundedDelivery wraps m.
func NewUnboundedDelivery[K comparable](m *l1.Manager[K]) UnboundedDelivery[K] {
	q := &eventQueue[K]{}
	q.cond = sync.NewCond(&q.mu)
	m.AddListenerFunc(func(e l1.Event[K]) {
		q.mu.Lock()
		q.events = append(q.events, e)
		if !q.running {
			q.running = true
			go q.drain()
		}
		q.mu.Unlock()
	})
	return UnboundedDelivery[K]{Manager: m, q: q}
}

func (q *eventQueue[K]) drain() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.events) > 0 {
		e := q.events[0]
		q.events = q.events[1:]
		fns := q.fns
		q.mu.Unlock()
		for _, f := range fns {
			f(e)
		}
		q.mu.Lock()
	}
	q.running = false
}

// AddListenerFunc adds f behind the queue.
func (m UnboundedDelivery[K]) AddListenerFunc(f func(l1.Event[K])) {
	m.q.mu.Lock()
	m.q.fns = append(m.q.fns, f)
	m.q.mu.Unlock()
}

// Stats reports the queue's backlog as PendingEvents.
func (m UnboundedDelivery[K]) Stats() l1.Stats {
	st := m.Manager.Stats()
	m.q.mu.Lock()
	st.PendingEvents += len(m.q.events)
	m.q.mu.Unlock()
	return st
}

// forever is a lock lifetime no test reaches.
const forever = 1_000_000 * time.Hour

// WritesNeverExpire configures a manager whose write locks never lapse, so
// an abandoned write is never reclaimed and, once finished, becomes
// readable: LMCache's "expired writes become readable" as a model sees it.
func WritesNeverExpire(c *l1.Config) { c.WriteTTL = forever }

// ReadsNeverExpire configures a manager whose read locks never lapse, so a
// temporary object whose reader vanished is never freed.
func ReadsNeverExpire(c *l1.Config) { c.ReadTTL = forever }

// PrefixNoneIgnored runs the all-or-nothing baseline as the one pass: the
// strategy that must grant all or nothing grants a prefix.
func PrefixNoneIgnored(s baseline.Strategy) baseline.Strategy {
	if s == baseline.None {
		return baseline.OnePass
	}
	return s
}

// RejectLate rejects a call with mismatched temporary flags only after
// reserving the keys that have flags: the error is right, but the rejected
// call changed state.
type RejectLate[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite reserves the flagged keys, then returns ErrInvalidArgument.
func (m RejectLate[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	if len(temporary) == 0 || len(temporary) == len(keys) {
		return m.Manager.ReserveWrite(keys, temporary, size, mode)
	}
	n := min(len(keys), len(temporary))
	_, _ = m.Manager.ReserveWrite(keys[:n], temporary[:n], size, mode)
	return nil, fmt.Errorf("%w: %d temporary flags for %d keys", l1.ErrInvalidArgument, len(temporary), len(keys))
}

// ReadPrefixLocksAll is a ReserveReadPrefix that is a plain ReserveRead in
// disguise: it locks every readable key, those behind the first miss too,
// and then reports the keys after the miss as Skipped. Blocks behind a
// miss stay pinned and become most recently used.
type ReadPrefixLocksAll[K comparable] struct{ *l1.Manager[K] }

// ReserveReadPrefix read-locks every readable key and answers as if it
// had stopped at the first miss.
func (m ReadPrefixLocksAll[K]) ReserveReadPrefix(keys []K, locks int) ([]l1.Result, int, error) {
	rs, err := m.Manager.ReserveRead(keys, locks)
	if err != nil {
		return nil, 0, err
	}
	n := len(keys)
	for i, r := range rs {
		if i > n {
			rs[i] = l1.Result{Status: l1.Skipped}
		} else if r.Status != l1.OK {
			n = i
		}
	}
	return rs, n, nil
}

// QuarantineFreesAtLapse configures a manager whose lapsed writes are
// reclaimed at once, their blocks freed, whatever
// QuarantineLapsedWrites says: the block a lapsed writer may still be
// filling goes to the next writer, and, once that writer finishes, to its
// readers (LMCache's expiry bug).
func QuarantineFreesAtLapse(c *l1.Config) { c.QuarantineLapsedWrites = false }

// QuarantineEvicted treats quarantined blocks as evictable under pressure:
// when a ReserveWrite answers OutOfMemory, it aborts every lapsed write it
// handed out (the leases it saw granted that no longer hold their key's
// lock), which frees their quarantined blocks, and reserves the refused
// keys again into them. A writer still filling a quarantined block then
// shares it with the new one.
type QuarantineEvicted[K comparable] struct {
	*l1.Manager[K]
	granted *[]quarantineGrant[K]
}

type quarantineGrant[K comparable] struct {
	key   K
	lease l1.Lease
}

// NewQuarantineEvicted wraps m.
func NewQuarantineEvicted[K comparable](m *l1.Manager[K]) QuarantineEvicted[K] {
	return QuarantineEvicted[K]{Manager: m, granted: &[]quarantineGrant[K]{}}
}

// ReserveWrite reserves, and on OutOfMemory frees the lapsed writes'
// blocks and retries the refused keys.
func (m QuarantineEvicted[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	res, err := m.Manager.ReserveWrite(keys, temporary, size, mode)
	if err != nil {
		return res, err
	}
	var retry []int
	for i, r := range res {
		switch r.Status {
		case l1.OK:
			*m.granted = append(*m.granted, quarantineGrant[K]{keys[i], r.Lease})
		case l1.OutOfMemory:
			retry = append(retry, i)
		}
	}
	if len(retry) == 0 || m.Stats().QuarantinedObjects == 0 {
		return res, nil
	}
	var ks []K
	var ls []l1.Lease
	for _, g := range *m.granted {
		if s, ok := m.State(g.key); !ok || s.WriteLease != g.lease {
			ks, ls = append(ks, g.key), append(ls, g.lease)
		}
	}
	_, _ = m.Manager.AbortWrite(ks, ls)
	again := make([]K, len(retry))
	var temp []bool
	if len(temporary) > 0 {
		temp = make([]bool, len(retry))
	}
	for j, i := range retry {
		again[j] = keys[i]
		if temp != nil {
			temp[j] = temporary[i]
		}
	}
	rs, err := m.Manager.ReserveWrite(again, temp, size, mode)
	if err != nil {
		return res, nil
	}
	for j, i := range retry {
		res[i] = rs[j]
		if rs[j].Status == l1.OK {
			*m.granted = append(*m.granted, quarantineGrant[K]{keys[i], rs[j].Lease})
		}
	}
	return res, nil
}

// ReadHitOnFind counts a ReserveRead hit when the key is found, before
// its readability is checked: a write-locked key (KeyNotReadable) counts
// as a hit, not a miss, and a cache being written looks warm.
type ReadHitOnFind[K comparable] struct {
	*l1.Manager[K]
	found *uint64 // write-locked keys found so far
}

// NewReadHitOnFind wraps m.
func NewReadHitOnFind[K comparable](m *l1.Manager[K]) ReadHitOnFind[K] {
	return ReadHitOnFind[K]{Manager: m, found: new(uint64)}
}

// ReserveRead reads and notes the keys it found write-locked.
func (m ReadHitOnFind[K]) ReserveRead(keys []K, locks int) ([]l1.Result, error) {
	res, err := m.Manager.ReserveRead(keys, locks)
	for _, r := range res {
		if r.Status == l1.KeyNotReadable {
			*m.found++
		}
	}
	return res, err
}

// Stats reports the write-locked keys found as hits.
func (m ReadHitOnFind[K]) Stats() l1.Stats {
	st := m.Manager.Stats()
	c := &st.Lookups[l1.LookupRead]
	c.Hits += *m.found
	c.Misses -= *m.found
	return st
}
