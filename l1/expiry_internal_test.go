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

// testClock is a manual clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClockedManager(t *testing.T, objects int, ttl time.Duration) (*Manager[int], *testClock) {
	t.Helper()
	r, err := hostmem.NewHeapRegion(int64(objects) * 4096)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: 4096})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	clk := &testClock{t: time.Unix(1_000_000, 0)}
	m, err := New[int](a, Config{Now: clk.Now, ReadTTL: ttl, WriteTTL: ttl})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m, clk
}

// putTemp stores k as a finished temporary object and read-locks it.
func putTempRead(t *testing.T, m *Manager[int], k int) Lease {
	t.Helper()
	res, err := m.ReserveWrite([]int{k}, []bool{true}, 4096, ModeAll)
	require.NoError(t, err)
	require.Equal(t, OK, res[0].Status)
	sts, err := m.FinishWrite([]int{k}, []Lease{res[0].Lease})
	require.NoError(t, err)
	require.Equal(t, []Status{OK}, sts)
	rr, err := m.ReserveRead([]int{k}, 1)
	require.NoError(t, err)
	require.Equal(t, OK, rr[0].Status)
	return rr[0].Lease
}

// TestExpiryEntryOfReusedRecord: a record's stale queue entry must not
// pass for the entry of the next object in the record. D and A, temporary
// and read-locked, enter the temporary queue; A goes (its reader finished),
// leaving its entry behind D's; C is read-locked later, and B, in A's
// record, later still, through the same queues as A. Once D's and C's
// locks have lapsed and B's has not, the sweep must reclaim both: A's
// stale entry, reached after D's, must not stop it as if it were B's live
// lock (fails when store.release resets the record's queue sequence
// number).
func TestExpiryEntryOfReusedRecord(t *testing.T) {
	const ttl = time.Second
	m, clk := newClockedManager(t, 8, ttl)
	res, err := m.ReserveWrite([]int{3}, []bool{true}, 4096, ModeAll) // C's record first
	require.NoError(t, err)
	putTempRead(t, m, 4)           // D: read expiry t0+ttl
	leaseA := putTempRead(t, m, 1) // A
	sts, err := m.FinishRead([]int{1}, []Lease{leaseA}, 1)
	require.NoError(t, err)
	require.Equal(t, []Status{OK}, sts) // A is gone; its record is free

	clk.Advance(time.Millisecond)
	sts, err = m.FinishWrite([]int{3}, []Lease{res[0].Lease})
	require.NoError(t, err)
	require.Equal(t, []Status{OK}, sts)
	_, err = m.ReserveRead([]int{3}, 1) // C: read expiry t0+1ms+ttl
	require.NoError(t, err)

	clk.Advance(time.Millisecond)
	putTempRead(t, m, 2) // B, in A's record: read expiry t0+2ms+ttl
	require.Equal(t, 3, m.Len())

	clk.Advance(ttl - time.Millisecond) // D and C lapsed, B not
	assert.Equal(t, 1, m.Len(), "D's and C's lapsed temporary read locks are reclaimed")
	assert.Equal(t, 1, m.Stats().TemporaryReadLocked)
	assert.Equal(t, uint64(2), m.Stats().Expired)
	_, ok := m.State(2)
	assert.True(t, ok)
}

// TestExpiryQueueBounded: a lock that stays at the front of its queue
// (key 1's read lock, key 8's write lock) while other objects are locked
// and unlocked behind it, at one instant (a clock that does not move),
// leaves stale entries the sweep cannot reach; compaction keeps each queue
// within twice its objects plus compactSlack (fails without it), and the
// sweep still reclaims every lapsed lock once the clock moves.
func TestExpiryQueueBounded(t *testing.T) {
	const ttl = time.Second
	m, clk := newClockedManager(t, 64, ttl)
	keys := []int{1, 2, 3, 4}
	res, err := m.ReserveWrite(keys, nil, 4096, ModeAll)
	require.NoError(t, err)
	leases := make([]Lease, len(keys))
	for i, r := range res {
		leases[i] = r.Lease
	}
	_, err = m.FinishWrite(keys, leases)
	require.NoError(t, err)
	_, err = m.ReserveRead(keys[:1], 1) // stays locked
	require.NoError(t, err)
	_, err = m.ReserveWrite([]int{8}, nil, 4096, ModeAll) // stays locked
	require.NoError(t, err)
	// After an entry goes in, at most twice the queue's objects plus
	// compactSlack; dequeues then leave entries until the next push.
	bound := func(id queueID, left int) {
		q := &m.queues[id]
		require.LessOrEqual(t, len(q.ents)-q.head, 2*(q.live+left)+compactSlack+1, "queue %d", id)
	}
	for range 10_000 {
		rr, err := m.ReserveRead(keys[1:], 1)
		require.NoError(t, err)
		for i, r := range rr {
			leases[i] = r.Lease
		}
		bound(readQueue, 0)
		_, err = m.FinishRead(keys[1:], leases[:3], 1)
		require.NoError(t, err)
		bound(readQueue, 3)
		// A write and its abort, of a key of its own.
		w, err := m.ReserveWrite([]int{9}, nil, 4096, ModeAll)
		require.NoError(t, err)
		bound(writeQueue, 0)
		_, err = m.AbortWrite([]int{9}, []Lease{w[0].Lease})
		require.NoError(t, err)
	}
	assert.Equal(t, 1, m.queues[readQueue].live)
	assert.Equal(t, 1, m.queues[writeQueue].live)

	clk.Advance(ttl)
	assert.Equal(t, 4, m.Len(), "key 8's write lock lapsed: reclaimed")
	s, ok := m.State(1)
	require.True(t, ok)
	assert.Zero(t, s.ReadLocks, "key 1's read lock lapsed")
	assert.True(t, s.Evictable)
	for id := range m.queues {
		assert.Zero(t, m.queues[id].live, "queue %d", id)
	}
}

// TestExpiryQueueOrder: push keeps the entries in expiry order even if
// handed an earlier expiry, and pop reclaims the dropped prefix.
func TestExpiryQueueOrder(t *testing.T) {
	var q expQueue
	for _, x := range []int64{10, 20, 30, 15, 30, 5} {
		q.push(expEntry{expiry: x})
	}
	var got []int64
	for _, e := range q.ents[q.head:] {
		got = append(got, e.expiry)
	}
	assert.Equal(t, []int64{5, 10, 15, 20, 30, 30}, got)
	for i := range 3000 {
		q.push(expEntry{expiry: int64(100 + i)})
	}
	for range 2000 {
		q.pop()
	}
	assert.Less(t, q.head, 1100, "the dropped prefix is reclaimed")
	assert.Equal(t, int64(100+2000-6), q.ents[q.head].expiry)
	for len(q.ents) > q.head {
		q.pop()
	}
	assert.Zero(t, q.head)
}
