package l1

import (
	"fmt"

	"github.com/kvalloc/kvalloc/internal/invariants"
)

// EventKind says what happened to the keys of an Event.
type EventKind uint8

const (
	// EventReadReserved: ReserveRead locked the keys for reading.
	EventReadReserved EventKind = iota
	// EventReadFinished: FinishRead released read locks on the keys.
	EventReadFinished
	// EventWriteReserved: ReserveWrite locked the keys for writing, newly
	// allocated and re-locked keys alike, in request order. Only granted
	// keys appear: with a partial grant, the prefix.
	EventWriteReserved
	// EventWriteFinished: FinishWrite committed the keys.
	EventWriteFinished
	// EventWriteFinishedReadReserved: FinishWriteAndReserveRead committed
	// the keys and locked them for reading.
	EventWriteFinishedReadReserved
	// EventRemoved: the manager dropped the keys and freed their memory
	// (but for CauseQuarantined, which keeps it, and for a forced
	// CauseDeleted or CauseCleared of a locked object, whose block waits
	// for its holders: see "Forced deletes" in the package doc);
	// Event.Cause says why.
	EventRemoved
	// EventAccessed: Touch marked the keys as recently used.
	EventAccessed
)

var eventKindNames = [...]string{
	EventReadReserved:              "read-reserved",
	EventReadFinished:              "read-finished",
	EventWriteReserved:             "write-reserved",
	EventWriteFinished:             "write-finished",
	EventWriteFinishedReadReserved: "write-finished-read-reserved",
	EventRemoved:                   "removed",
	EventAccessed:                  "accessed",
}

// String names the kind, e.g. "write-reserved".
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Cause says why keys were removed.
type Cause uint8

const (
	// CauseNone is the Cause of every event but EventRemoved.
	CauseNone Cause = iota
	// CauseDeleted: Delete removed the keys.
	CauseDeleted
	// CauseCleared: Clear or Close removed the keys.
	CauseCleared
	// CauseEvicted: eviction, on demand or by EvictTo, removed the keys.
	CauseEvicted
	// CauseExpired: a write lock, or a temporary object's read lock,
	// lapsed (see lock.go).
	CauseExpired
	// CauseAborted: AbortWrite discarded the keys' reservations.
	CauseAborted
	// CauseTemporaryRead: FinishRead released the last read lock of a
	// temporary object.
	CauseTemporaryRead
	// CauseQuarantined: a write lock lapsed under
	// Config.QuarantineLapsedWrites. The key is gone, but its block is
	// not freed: it stays quarantined until the writer finishes or aborts
	// (see quarantine.go).
	CauseQuarantined
)

var causeNames = [...]string{
	CauseNone:          "none",
	CauseDeleted:       "deleted",
	CauseCleared:       "cleared",
	CauseEvicted:       "evicted",
	CauseExpired:       "expired",
	CauseAborted:       "aborted",
	CauseTemporaryRead: "temporary-read",
	CauseQuarantined:   "quarantined",
}

// String names the cause, e.g. "evicted".
func (c Cause) String() string {
	if int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}

// Event reports keys an operation changed. Keys is never empty, is in the
// order the operation handled the keys, and belongs to the listener, which
// may keep and modify it: each listener gets its own slice.
type Event[K comparable] struct {
	Kind  EventKind
	Cause Cause // for EventRemoved only
	Keys  []K
}

// Listener receives the keys each operation changed, one callback per
// kind of change, as LMCache's L1 listeners do. Each callback gets only the
// keys that succeeded, never an empty list, in the order the operation
// handled them; the slice belongs to the listener, which may keep and
// modify it (every listener gets its own).
//
// Delivery guarantees:
//
//   - Order. Listener calls are serialized (never two at once) and follow
//     the order in which operations took the manager lock; within an
//     operation, the order in which it made its events. Each event goes
//     to the listeners registered when it was made, in registration order.
//   - Blocking. Listeners run outside the manager lock, on the goroutine of
//     the operation that made the events: each operation delivers its own
//     events, and only its own, before it returns. An operation whose
//     events are not next waits until the events of earlier operations
//     have been delivered (by their own callers). So a slow listener slows
//     every caller that makes events, as a slow consumer should, and the
//     events waiting for delivery are at most those of the operations
//     waiting for their turn: one operation per waiting goroutine, and
//     what calls made from inside listeners queued (Stats.PendingEvents,
//     Counters.PeakPendingEvents). Operations that make no event (a read of
//     missing keys, State, Stats, …) never wait for listeners.
//   - Re-entrancy. A listener may call back into the manager from its own
//     goroutine. Such a call does not wait: its events are queued behind
//     those of the operations already waiting, and it returns at once;
//     they are delivered by the goroutine that delivers the events just
//     before them, after the current listener returns. A listener must not
//     wait for another goroutine's call to this manager that makes events,
//     since that call waits for the listener (as with any lock). A
//     listener of another manager counts as a listener here: its calls do
//     not wait while this manager is delivering.
//   - Panics. A listener's panic propagates to the caller of the operation
//     being delivered, after that operation has completed; that
//     operation's undelivered events are dropped, and later events are
//     delivered as usual.
//
// A listener added by AddListener receives the events of operations that
// start after it was added.
type Listener[K comparable] interface {
	// WriteReserved: ReserveWrite locked the keys for writing, newly
	// allocated and re-locked keys alike. With a partial grant, only the
	// granted prefix.
	WriteReserved(keys []K)
	// WriteFinished: FinishWrite committed the keys.
	WriteFinished(keys []K)
	// WriteFinishedReadReserved: FinishWriteAndReserveRead committed the
	// keys and locked them for reading, in one step.
	WriteFinishedReadReserved(keys []K)
	// ReadReserved: ReserveRead locked the keys for reading.
	ReadReserved(keys []K)
	// ReadFinished: FinishRead released read locks on the keys.
	ReadFinished(keys []K)
	// Removed: the manager dropped the keys and freed their memory, because
	// they were deleted, evicted, expired, aborted or cleared (cause).
	Removed(keys []K, cause Cause)
	// Accessed: Touch marked the keys as recently used.
	Accessed(keys []K)
}

// ListenerFunc adapts one function of Events to a Listener: each callback
// becomes one Event of the matching kind.
type ListenerFunc[K comparable] func(Event[K])

// WriteReserved calls f with an EventWriteReserved.
func (f ListenerFunc[K]) WriteReserved(keys []K) { f(Event[K]{Kind: EventWriteReserved, Keys: keys}) }

// WriteFinished calls f with an EventWriteFinished.
func (f ListenerFunc[K]) WriteFinished(keys []K) { f(Event[K]{Kind: EventWriteFinished, Keys: keys}) }

// WriteFinishedReadReserved calls f with an EventWriteFinishedReadReserved.
func (f ListenerFunc[K]) WriteFinishedReadReserved(keys []K) {
	f(Event[K]{Kind: EventWriteFinishedReadReserved, Keys: keys})
}

// ReadReserved calls f with an EventReadReserved.
func (f ListenerFunc[K]) ReadReserved(keys []K) { f(Event[K]{Kind: EventReadReserved, Keys: keys}) }

// ReadFinished calls f with an EventReadFinished.
func (f ListenerFunc[K]) ReadFinished(keys []K) { f(Event[K]{Kind: EventReadFinished, Keys: keys}) }

// Removed calls f with an EventRemoved carrying cause.
func (f ListenerFunc[K]) Removed(keys []K, cause Cause) {
	f(Event[K]{Kind: EventRemoved, Cause: cause, Keys: keys})
}

// Accessed calls f with an EventAccessed.
func (f ListenerFunc[K]) Accessed(keys []K) { f(Event[K]{Kind: EventAccessed, Keys: keys}) }

// deliver hands ev to the callback of l that matches its kind.
func deliver[K comparable](l Listener[K], ev Event[K]) {
	switch ev.Kind {
	case EventWriteReserved:
		l.WriteReserved(ev.Keys)
	case EventWriteFinished:
		l.WriteFinished(ev.Keys)
	case EventWriteFinishedReadReserved:
		l.WriteFinishedReadReserved(ev.Keys)
	case EventReadReserved:
		l.ReadReserved(ev.Keys)
	case EventReadFinished:
		l.ReadFinished(ev.Keys)
	case EventRemoved:
		l.Removed(ev.Keys, ev.Cause)
	case EventAccessed:
		l.Accessed(ev.Keys)
	}
}

// AddListenerFunc registers f, through ListenerFunc, for the events of
// later operations.
func (m *Manager[K]) AddListenerFunc(f func(Event[K])) {
	if f != nil {
		m.AddListener(ListenerFunc[K](f))
	}
}

// AddListener registers l for the events of later operations.
func (m *Manager[K]) AddListener(l Listener[K]) {
	if l == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Copy on write: queued events keep the slice they were made with.
	ls := make([]Listener[K], len(m.listeners), len(m.listeners)+1)
	copy(ls, m.listeners)
	m.listeners = append(ls, l)
}

// listening reports whether events need to be built at all.
func (m *Manager[K]) listening() bool { return len(m.listeners) > 0 }

// emitLocked queues an event for the current operation. Empty key lists are
// dropped.
func (m *Manager[K]) emitLocked(kind EventKind, keys []K) {
	if len(keys) == 0 || !m.listening() {
		return
	}
	m.delivery.push(queued[K]{ev: Event[K]{Kind: kind, Keys: keys}, listeners: m.listeners})
}

// noteRemovedLocked records one removed key, merging it into the current
// operation's last event when that is a removal with the same cause.
func (m *Manager[K]) noteRemovedLocked(key K, cause Cause) {
	if !m.listening() {
		return
	}
	d := &m.delivery
	if n := len(d.queue); n > d.opStart {
		if q := &d.queue[n-1]; q.ev.Kind == EventRemoved && q.ev.Cause == cause {
			q.ev.Keys = append(q.ev.Keys, key)
			return
		}
	}
	d.push(queued[K]{ev: Event[K]{Kind: EventRemoved, Cause: cause, Keys: []K{key}}, listeners: m.listeners})
}

// unlock ends an operation: it frees the blocks of the objects the
// operation removed, checks the manager's invariants under the invariants
// build tag (invariants.go), releases the manager lock and, when the
// operation made events, delivers them (see Listener).
func (m *Manager[K]) unlock() {
	m.flushLocked()
	if invariants.Enabled {
		m.checkInvariantsLocked()
	}
	d := &m.delivery
	if len(d.queue) == d.opStart { // no events
		m.mu.Unlock()
		return
	}
	d.ticket++
	t := d.ticket
	// Only the delivering goroutine can be inside a listener of this
	// manager, so the stack is looked at only while a delivery runs.
	reentrant := d.busy && inListener()
	for i := d.opStart; i < len(d.queue); i++ {
		d.queue[i].ticket, d.queue[i].orphan = t, reentrant
	}
	if n := uint64(len(d.queue) - d.head); n > m.stats.PeakPendingEvents {
		m.stats.PeakPendingEvents = n
	}
	if reentrant {
		m.mu.Unlock()
		return
	}
	m.deliverLocked(t)
}
