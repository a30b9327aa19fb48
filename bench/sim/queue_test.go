package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQueueOrder: events come out by instant, then kind, then push order,
// and Next stops at the first event after its bound.
func TestQueueOrder(t *testing.T) {
	var q Queue[string]
	q.Push(2*time.Second, 1, "b1")
	q.Push(time.Second, 3, "a3")
	q.Push(2*time.Second, 0, "b0")
	q.Push(time.Second, 3, "a3'")
	q.Push(time.Second, 0, "a0")
	q.Push(3*time.Second, 0, "c0")
	var got []string
	for e, ok := q.Next(2 * time.Second); ok; e, ok = q.Next(2 * time.Second) {
		got = append(got, e.P)
	}
	require.Equal(t, []string{"a0", "a3", "a3'", "b0", "b1"}, got)
	require.Equal(t, 1, q.Len())
	_, ok := q.Next(3*time.Second - 1)
	require.False(t, ok, "an event after the bound")
	e := q.Pop()
	require.Equal(t, Event[string]{T: 3 * time.Second, Kind: 0, P: "c0", seq: 6}, e)
	_, ok = q.Next(time.Hour)
	require.False(t, ok, "an empty queue")
}

func TestClock(t *testing.T) {
	var c Clock
	require.Equal(t, Epoch, c.Time())
	require.Equal(t, 3*time.Second, c.AdvanceTo(3*time.Second))
	require.Zero(t, c.AdvanceTo(time.Second), "the clock does not run back")
	require.Zero(t, c.AdvanceTo(3*time.Second))
	require.Equal(t, 3*time.Second, c.Now())
	require.Equal(t, Epoch.Add(3*time.Second), c.Time())
}

func TestGauge(t *testing.T) {
	var g Gauge
	require.Zero(t, g.Mean())
	require.Zero(t, g.Peak)
	for _, v := range []float64{0.5, 0, 0.25} {
		g.Add(v)
	}
	require.Equal(t, 0.25, g.Mean())
	require.Equal(t, 0.5, g.Peak)
}

// TestClockConcurrentReaders: a daemon's goroutines read the clock while
// the replay moves it (under -race this fails with a plain field).
func TestClockConcurrentReaders(t *testing.T) {
	var c Clock
	done := make(chan time.Duration)
	go func() {
		var last time.Duration
		for range 1000 {
			now := c.Now()
			if now < last {
				panic("the clock ran back")
			}
			last = now
			_ = c.Time()
		}
		done <- last
	}()
	for i := range 1000 {
		c.AdvanceTo(time.Duration(i) * time.Millisecond)
	}
	require.LessOrEqual(t, <-done, 999*time.Millisecond)
}
