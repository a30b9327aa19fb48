package l1

import (
	"reflect"
	"runtime"
	"slices"
	"sync"
)

// Event delivery (see Listener for the guarantees).
//
// Events are queued under the manager lock as each operation makes them.
// When the operation ends, its events get the next ticket, and its caller
// waits until they are at the head of the queue and nobody is delivering;
// then it delivers them, with the manager lock released around each
// listener call, and wakes the others. The events of a call made from
// inside a listener (an orphan: its caller does not wait) are delivered by
// whoever delivers the events just before them. Each goroutine has at most
// one operation waiting, so the queue holds at most one operation's events
// per waiting goroutine, plus orphans.

// queued is an event with the listeners registered when it was made.
type queued[K comparable] struct {
	ev        Event[K]
	listeners []Listener[K]
	ticket    uint64 // the operation that made it
	orphan    bool   // made from inside a listener: its caller did not wait
}

// delivery is the queue of events waiting for listeners.
type delivery[K comparable] struct {
	queue   []queued[K] // queue[head:] wait, in operation order
	head    int
	opStart int    // len(queue) when the current operation began
	ticket  uint64 // the last ticket handed out
	busy    bool   // a goroutine is delivering
	turn    *sync.Cond
}

func (d *delivery[K]) init(mu *sync.Mutex) { d.turn = sync.NewCond(mu) }

// begin marks the start of an operation.
func (d *delivery[K]) begin() { d.opStart = len(d.queue) }

func (d *delivery[K]) push(q queued[K]) { d.queue = append(d.queue, q) }

// pending is the number of undelivered events.
func (d *delivery[K]) pending() int { return len(d.queue) - d.head }

// pop removes the head event. It runs between operations only, so that
// opStart stays valid.
func (d *delivery[K]) pop() queued[K] {
	q := d.queue[d.head]
	d.queue[d.head] = queued[K]{}
	d.head++
	switch n := len(d.queue) - d.head; {
	case n == 0:
		d.queue, d.head = d.queue[:0], 0
	case d.head >= 64 && d.head >= n:
		copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
	return q
}

// deliverLocked delivers the events of ticket t, waiting for its turn,
// then any orphans that follow them. It is called with the manager lock
// held and returns with it released.
func (m *Manager[K]) deliverLocked(t uint64) {
	d := &m.delivery
	for {
		if !d.busy && d.pending() > 0 {
			if h := d.queue[d.head]; h.ticket == t || h.orphan {
				m.deliverHeadLocked()
				if h.ticket == t {
					for d.pending() > 0 && d.queue[d.head].orphan {
						m.deliverHeadLocked()
					}
					m.mu.Unlock()
					return
				}
				continue
			}
		}
		d.turn.Wait()
	}
}

// deliverHeadLocked delivers every event of the head's ticket, releasing
// the manager lock around each listener call, and wakes the waiters. When a
// listener panics it drops the ticket's other events and releases the
// manager lock before the panic goes on.
func (m *Manager[K]) deliverHeadLocked() {
	d := &m.delivery
	t := d.queue[d.head].ticket
	d.busy = true
	done := false
	defer func() {
		if done {
			return
		}
		m.mu.Lock()
		for d.pending() > 0 && d.queue[d.head].ticket == t {
			d.pop()
		}
		d.busy = false
		d.turn.Broadcast()
		m.mu.Unlock()
	}()
	for d.pending() > 0 && d.queue[d.head].ticket == t {
		q := d.pop()
		m.mu.Unlock()
		q.deliver()
		m.mu.Lock()
	}
	d.busy = false
	d.turn.Broadcast()
	done = true
}

// deliver hands the event to its listeners in order. Every listener but
// the first gets its own copy of the keys, made before any listener runs.
func (q *queued[K]) deliver() {
	ev := q.ev
	var copies [][]K
	if len(q.listeners) > 1 {
		copies = make([][]K, len(q.listeners)-1)
		for i := range copies {
			copies[i] = slices.Clone(ev.Keys)
		}
	}
	for i, l := range q.listeners {
		if i > 0 {
			ev.Keys = copies[i-1]
		}
		callListener(func() { deliver(l, ev) })
	}
}

// callListener runs f, one listener call. It is never inlined, so that its
// frame on a goroutine's stack marks the goroutine as inside a listener
// (see inListener).
//
//go:noinline
func callListener(f func()) { f() }

// callListenerName is the symbol name of callListener.
var callListenerName = runtime.FuncForPC(reflect.ValueOf(callListener).Pointer()).Name()

// inListener reports whether the calling goroutine is inside a listener
// call: whether callListener is on its stack. It walks the whole stack, and
// runs only while a delivery is in progress.
func inListener() bool {
	var pcs [64]uintptr
	for skip := 2; ; skip += len(pcs) {
		n := runtime.Callers(skip, pcs[:])
		for _, pc := range pcs[:n] {
			if f := runtime.FuncForPC(pc - 1); f != nil && f.Name() == callListenerName {
				return true
			}
		}
		if n < len(pcs) {
			return false
		}
	}
}
