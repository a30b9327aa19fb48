package sim

import (
	"sync/atomic"
	"time"
)

// Epoch is simulated time zero. Only differences matter; a fixed instant
// keeps a replay's l1 clock the same from run to run.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is simulated time: the time since Epoch, moved only by the
// replay. Its Time method is l1's Config.Now, so every lock lifetime of a
// replay runs on it. The zero Clock is at Epoch. Reading it is safe
// concurrently with AdvanceTo: a daemon replayed over a socket (bench/node)
// reads it on its connections' goroutines while the replay moves it.
type Clock struct {
	now atomic.Int64
}

// Now returns the simulated time since Epoch.
func (c *Clock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Time returns the simulated instant, Epoch + Now: the clock for
// l1.Config.Now.
func (c *Clock) Time() time.Time { return Epoch.Add(c.Now()) }

// AdvanceTo moves the clock forward to t and returns how far it moved; a
// t at or before Now leaves it where it is and returns 0, so the clock
// never runs back. One goroutine moves a clock; any may read it.
func (c *Clock) AdvanceTo(t time.Duration) time.Duration {
	now := c.Now()
	if t <= now {
		return 0
	}
	c.now.Store(int64(t))
	return t - now
}
