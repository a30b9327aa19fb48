package l2

import (
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestBreaker(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b := NewBreaker(3, time.Second, clk)
	fail := func() {
		t.Helper()
		if !b.Allow() {
			t.Fatalf("refused in state %v", b.State())
		}
		b.Done(false)
	}
	fail()
	fail()
	if !b.Allow() {
		t.Fatal("refused after 2 failures of 3")
	}
	b.Done(true) // a success resets the count
	fail()
	fail()
	if b.State() != Closed {
		t.Fatalf("state %v after 2 failures in a row", b.State())
	}
	fail()
	if b.State() != Open || b.Opens() != 1 {
		t.Fatalf("state %v, opens %d after 3 failures in a row", b.State(), b.Opens())
	}
	clk.add(999 * time.Millisecond)
	if b.Allow() {
		t.Fatal("allowed during the cooldown")
	}
	clk.add(time.Millisecond)
	if !b.Allow() {
		t.Fatal("no probe after the cooldown")
	}
	if b.State() != HalfOpen || b.Allow() {
		t.Fatalf("state %v: a second call got through while probing", b.State())
	}
	b.Done(false) // the probe failed: open again
	if b.State() != Open || b.Opens() != 2 || b.Allow() {
		t.Fatalf("state %v, opens %d after a failed probe", b.State(), b.Opens())
	}
	clk.add(time.Second)
	if !b.Allow() {
		t.Fatal("no second probe")
	}
	b.Done(true)
	if b.State() != Closed || !b.Allow() || !b.Allow() {
		t.Fatalf("state %v after a good probe", b.State())
	}
}

// TestBreakerClockJumps: a clock that goes back restarts the cooldown
// from its new reading; one that jumps forward ends it.
func TestBreakerClockJumps(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b := NewBreaker(1, time.Second, clk)
	b.Allow()
	b.Done(false)
	clk.add(-time.Hour)
	if b.Allow() {
		t.Fatal("allowed after the clock went back")
	}
	clk.add(time.Second)
	if !b.Allow() {
		t.Fatal("still open a cooldown after the clock went back")
	}
	b.Done(false)
	clk.add(100 * time.Hour)
	if !b.Allow() {
		t.Fatal("still open after a jump forward")
	}
	b.Done(true)
}

// TestBreakerRefuses: Refuses says what Allow would, without changing
// the breaker: closed, open in its cooldown, open past it (a probe would
// go: not refused, and still open), half-open with the probe out.
func TestBreakerRefuses(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	b := NewBreaker(1, time.Second, clk)
	if b.Refuses() {
		t.Fatal("a closed breaker refuses")
	}
	b.Allow()
	b.Done(false)
	for range 3 {
		if !b.Refuses() {
			t.Fatal("an open breaker in its cooldown does not refuse")
		}
	}
	clk.add(time.Second)
	if b.Refuses() || b.State() != Open {
		t.Fatalf("past the cooldown: refuses %v, state %v (Refuses must not let the probe out)", b.Refuses(), b.State())
	}
	if !b.Allow() || !b.Refuses() {
		t.Fatal("with the probe out, the breaker does not refuse")
	}
	b.Done(true)
	if b.Refuses() {
		t.Fatal("closed again, the breaker refuses")
	}
	clk.add(-time.Hour) // no effect on a closed breaker
	b.Allow()
	b.Done(false)
	clk.add(-time.Minute)
	if !b.Refuses() {
		t.Fatal("a clock gone back during the cooldown: not refused, as Allow would")
	}
}
