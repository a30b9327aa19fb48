package l1

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// With the system clock, read before the lock, a reading older than the
// manager's last is a caller's that waited behind a later one: it is no
// step, and it moves neither base (State's expiries) nor last (so the next
// reading does not count the same interval twice). A Config.Now clock's
// step back is still a jump back: base moves, and time moves on from the
// new reading.
func TestTickStaleSystemReading(t *testing.T) {
	r, err := hostmem.NewHeapRegion(16 * 4096)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: 4096})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })

	m, err := New[int](a, Config{})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.True(t, m.systemClock)
	stale := time.Now()
	m.lock()
	m.unlock()
	now, last, base := m.now, m.last, m.base
	require.True(t, stale.Before(last))
	m.mu.Lock()
	got := m.tick(stale)
	m.mu.Unlock()
	assert.Equal(t, now, got, "a stale reading is no step")
	assert.Equal(t, last, m.last, "nor the last reading")
	assert.Equal(t, base, m.base, "nor a jump back")
	next := last.Add(time.Millisecond)
	m.mu.Lock()
	got = m.tick(next)
	m.mu.Unlock()
	assert.Equal(t, now+int64(time.Millisecond), got, "the next reading counts its own step once")

	// A Config.Now clock: a step back is a jump, as before.
	var mu sync.Mutex
	c := time.Unix(1_000_000, 0)
	clk := func() time.Time { mu.Lock(); defer mu.Unlock(); return c }
	m2, err := New[int](a, Config{Now: clk})
	require.NoError(t, err)
	t.Cleanup(func() { m2.Close() })
	require.False(t, m2.systemClock)
	m2.mu.Lock()
	n0 := m2.tick(c.Add(time.Second))
	n1 := m2.tick(c)
	n2 := m2.tick(c.Add(time.Millisecond))
	m2.mu.Unlock()
	assert.Equal(t, int64(time.Second), n0)
	assert.Equal(t, n0, n1, "a jump back stops the manager's time")
	assert.Equal(t, n0+int64(time.Millisecond), n2, "and it moves on from the new reading")
	assert.Equal(t, c.Add(-time.Second), m2.base, "base + now is the reading again")
}
