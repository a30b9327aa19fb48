package l2

import (
	"sync"
	"time"
)

// BreakerState is a circuit breaker's state.
type BreakerState int32

// Breaker states.
const (
	// Closed: calls go through; failures in a row are counted.
	Closed BreakerState = iota
	// Open: every call is refused at once until the cooldown ends.
	Open
	// HalfOpen: the cooldown ended; one call at a time probes the store.
	HalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "BreakerState(?)"
}

// Clock is the breaker's time source; tests give a fake one.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Breaker is a circuit breaker: after failures calls in a row fail it
// opens, refusing every call for cooldown; then it is half-open and lets
// one call through at a time: a success closes it, a failure opens it for
// another cooldown. A clock that jumps back restarts the cooldown from
// the earlier reading (never longer than one cooldown of readings from
// then); one that jumps forward ends it.
type Breaker struct {
	failures int
	cooldown time.Duration
	clock    Clock

	mu       sync.Mutex
	state    BreakerState
	inRow    int
	openedAt time.Time
	probing  bool
	opens    uint64
}

// NewBreaker returns a closed breaker; failures < 1 is 1, and a nil
// clock is the wall clock.
func NewBreaker(failures int, cooldown time.Duration, clock Clock) *Breaker {
	if clock == nil {
		clock = wallClock{}
	}
	return &Breaker{failures: max(failures, 1), cooldown: cooldown, clock: clock}
}

// Allow reports whether a call may go to the store now. Every allowed
// call must be followed by exactly one Done.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return true
	case Open:
		now := b.clock.Now()
		if now.Before(b.openedAt) {
			// The clock went back: restart the cooldown from now.
			b.openedAt = now
		}
		if now.Sub(b.openedAt) < b.cooldown {
			return false
		}
		b.state = HalfOpen
		fallthrough
	default: // HalfOpen
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
}

// Refuses reports whether Allow would refuse a call now, without
// changing the breaker: open within its cooldown (or its clock gone
// back), or half-open with its one probe out.
func (b *Breaker) Refuses() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		now := b.clock.Now()
		return now.Before(b.openedAt) || now.Sub(b.openedAt) < b.cooldown
	case HalfOpen:
		return b.probing
	}
	return false
}

// Done reports the outcome of an allowed call.
func (b *Breaker) Done(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == HalfOpen {
		b.probing = false
		if ok {
			b.state, b.inRow = Closed, 0
		} else {
			b.open()
		}
		return
	}
	if ok {
		b.inRow = 0
		return
	}
	if b.inRow++; b.inRow >= b.failures && b.state == Closed {
		b.open()
	}
}

// Trip reports an allowed call that failed in a way that opens the
// breaker at once, whatever the count: a call that ran out its whole
// deadline (every such call costs its caller that deadline, so one is
// enough to stop paying it). An open breaker stays open, its cooldown
// unchanged.
func (b *Breaker) Trip() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == HalfOpen {
		b.probing = false
	}
	if b.state != Open {
		b.open()
	}
}

// Release reports an allowed call whose outcome says nothing about the
// store: the caller's own deadline or cancellation cut it short. It
// counts neither way; a half-open breaker lets the next call probe.
func (b *Breaker) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == HalfOpen {
		b.probing = false
	}
}

func (b *Breaker) open() {
	b.state, b.openedAt, b.inRow = Open, b.clock.Now(), 0
	b.opens++
}

// State returns the breaker's state (Open until a call finds the cooldown
// over).
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Opens is how many times the breaker has opened.
func (b *Breaker) Opens() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opens
}
