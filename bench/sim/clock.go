package sim

import "time"

// Epoch is simulated time zero. Only differences matter; a fixed instant
// keeps a replay's l1 clock the same from run to run.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is simulated time: the time since Epoch, moved only by the
// replay. Its Time method is l1's Config.Now, so every lock lifetime of a
// replay runs on it. The zero Clock is at Epoch.
type Clock struct {
	now time.Duration
}

// Now returns the simulated time since Epoch.
func (c *Clock) Now() time.Duration { return c.now }

// Time returns the simulated instant, Epoch + Now: the clock for
// l1.Config.Now.
func (c *Clock) Time() time.Time { return Epoch.Add(c.now) }

// AdvanceTo moves the clock forward to t and returns how far it moved; a
// t at or before Now leaves it where it is and returns 0, so the clock
// never runs back.
func (c *Clock) AdvanceTo(t time.Duration) time.Duration {
	if t <= c.now {
		return 0
	}
	d := t - c.now
	c.now = t
	return d
}
