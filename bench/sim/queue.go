package sim

import (
	"container/heap"
	"time"
)

// Event is one timed action of a replay: its instant T, its Kind, which
// orders the events of one instant (the lower kind first), and what it
// carries.
type Event[P any] struct {
	T    time.Duration
	Kind uint8
	P    P
	seq  uint64
}

// Queue is the event heap of a replay: events come out by instant, then
// kind, then in the order they were pushed. The zero Queue is empty.
type Queue[P any] struct {
	h   events[P]
	seq uint64
}

// Push schedules an event carrying p at instant t.
func (q *Queue[P]) Push(t time.Duration, kind uint8, p P) {
	q.seq++
	heap.Push(&q.h, Event[P]{T: t, Kind: kind, P: p, seq: q.seq})
}

// Len returns the number of events waiting.
func (q *Queue[P]) Len() int { return len(q.h) }

// Next removes and returns the first event if it is due at or before t,
// and reports whether there was one.
func (q *Queue[P]) Next(t time.Duration) (Event[P], bool) {
	if len(q.h) == 0 || q.h[0].T > t {
		return Event[P]{}, false
	}
	return heap.Pop(&q.h).(Event[P]), true
}

// Pop removes and returns the first event; the queue must not be empty.
func (q *Queue[P]) Pop() Event[P] { return heap.Pop(&q.h).(Event[P]) }

// events implements container/heap's interface.
type events[P any] []Event[P]

func (h events[P]) Len() int { return len(h) }
func (h events[P]) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.T != b.T {
		return a.T < b.T
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.seq < b.seq
}
func (h events[P]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events[P]) Push(x any)   { *h = append(*h, x.(Event[P])) }
func (h *events[P]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = Event[P]{}
	*h = old[:len(old)-1]
	return e
}
