package l1

import "fmt"

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
	// EventRemoved: the manager dropped the keys and freed their memory;
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
)

var causeNames = [...]string{
	CauseNone:          "none",
	CauseDeleted:       "deleted",
	CauseCleared:       "cleared",
	CauseEvicted:       "evicted",
	CauseExpired:       "expired",
	CauseAborted:       "aborted",
	CauseTemporaryRead: "temporary-read",
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
// may keep it.
type Event[K comparable] struct {
	Kind  EventKind
	Cause Cause // for EventRemoved only
	Keys  []K
}

// Listener receives the keys each operation changed, one callback per
// kind of change, as LMCache's L1 listeners do. Each callback gets only the
// keys that succeeded, never an empty list, in the order the operation
// handled them; the slice belongs to the listener, which may keep it.
//
// Listeners run outside the manager lock, so a listener may call back into
// the manager, from its own goroutine or any other. Calls are serialized and
// in operation order: events are queued under the manager lock as each
// operation makes them, and one goroutine at a time drains the queue. The
// goroutine whose operation finds the queue idle drains it, its own events
// and any that other operations queue meanwhile, before it returns; an
// operation that finds another goroutine draining (including an operation a
// listener makes) leaves its events to that goroutine and returns at once.
// So when an operation returns its events have been delivered, unless
// another delivery was in progress, or it was called from a listener, in
// which case they follow the current listener call.
//
// A listener added by AddListener receives the events of operations that
// start after it was added. A listener's panic propagates to the caller of
// the operation that was delivering (after that operation has completed);
// the events of the batch being delivered that had not yet been handed out
// are dropped, and later events are delivered as usual.
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

// queued is an event with the listeners registered when it was made.
type queued[K comparable] struct {
	ev        Event[K]
	listeners []Listener[K]
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
	m.queue = append(m.queue, queued[K]{ev: Event[K]{Kind: kind, Keys: keys}, listeners: m.listeners})
}

// noteRemovedLocked records one removed key, merging it into the current
// operation's last event when that is a removal with the same cause.
func (m *Manager[K]) noteRemovedLocked(key K, cause Cause) {
	if !m.listening() {
		return
	}
	if n := len(m.queue); n > m.opStart {
		if q := &m.queue[n-1]; q.ev.Kind == EventRemoved && q.ev.Cause == cause {
			q.ev.Keys = append(q.ev.Keys, key)
			return
		}
	}
	m.queue = append(m.queue, queued[K]{ev: Event[K]{Kind: EventRemoved, Cause: cause, Keys: []K{key}}, listeners: m.listeners})
}

// unlock ends an operation: it frees the blocks of the objects the
// operation removed, releases the manager lock and delivers the queued
// events unless another goroutine is delivering them already.
func (m *Manager[K]) unlock() {
	m.flushLocked()
	if m.delivering || len(m.queue) == 0 {
		m.mu.Unlock()
		return
	}
	m.delivering = true
	locked := true
	defer func() {
		if !locked {
			m.mu.Lock()
		}
		m.delivering = false
		m.mu.Unlock()
	}()
	for len(m.queue) > 0 {
		batch := m.queue
		m.queue = nil
		m.mu.Unlock()
		locked = false
		for _, q := range batch {
			for _, l := range q.listeners {
				deliver(l, q.ev)
			}
		}
		m.mu.Lock()
		locked = true
	}
}
