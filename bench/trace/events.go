package trace

import (
	"container/heap"
	"time"
)

// epoch is simulated time zero; only differences matter.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// simClock turns a nanosecond counter into an l1 clock.
func simClock(now func() int64) func() time.Time {
	return func() time.Time { return epoch.Add(time.Duration(now())) }
}

// eventKind orders the events of one instant: sweeps, then finishes; the
// arrivals of that instant come after both.
type eventKind uint8

const (
	evSweep eventKind = iota
	evFinish
)

// event is a timed action of the replay: a finishing request (its flight)
// or a periodic sweep.
type event struct {
	t    int64 // simulated nanoseconds
	kind eventKind
	seq  uint64 // insertion order, for ties
	f    *flight
}

// eventQueue is a min-heap of events by (t, kind, seq), for container/heap.
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	a, b := &q[i], &q[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.seq < b.seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*q = old[:len(old)-1]
	return e
}

// events wraps eventQueue with a sequence counter.
type events struct {
	q   eventQueue
	seq uint64
}

func (e *events) push(t int64, kind eventKind, f *flight) {
	e.seq++
	heap.Push(&e.q, event{t: t, kind: kind, seq: e.seq, f: f})
}

func (e *events) pop() event   { return heap.Pop(&e.q).(event) }
func (e *events) peek() *event { return &e.q[0] }
func (e *events) len() int     { return len(e.q) }
