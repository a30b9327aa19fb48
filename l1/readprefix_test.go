package l1_test

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/internal/invariants"
	"github.com/kvalloc/kvalloc/l1"
)

// readPrefix calls ReserveReadPrefix and requires no error.
func (e *env) readPrefix(t testing.TB, ks []int, locks int) ([]l1.Result, int) {
	t.Helper()
	rs, n, err := e.m.ReserveReadPrefix(ks, locks)
	require.NoError(t, err)
	require.Len(t, rs, len(ks))
	return rs, n
}

// snapshotKeys returns the keys of Snapshot, least recently used first.
func (e *env) snapshotKeys() []int {
	var out []int
	for _, s := range e.m.Snapshot() {
		out = append(out, s.Key)
	}
	return out
}

func TestReserveReadPrefix(t *testing.T) {
	t.Run("stops_at_the_first_missing_key", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		w := e.put(t, []int{1, 2, 4}, obj)
		e.rec.take()
		rs, n := e.readPrefix(t, []int{1, 2, 3, 4}, 1)
		assert.Equal(t, 2, n)
		assert.Equal(t, []l1.Status{l1.OK, l1.OK, l1.KeyNotExist, l1.Skipped}, statuses(rs))
		assert.Equal(t, w[0].Block, rs[0].Block)
		assert.Equal(t, w[1].Block, rs[1].Block)
		assert.Equal(t, e.rl([]int{1, 2}), []l1.Lease{rs[0].Lease, rs[1].Lease})
		assert.Zero(t, rs[3].Block, "a skipped key gets no block")
		assert.Zero(t, rs[3].Lease)
		assert.Equal(t, 0, e.state(t, 4).ReadLocks, "nothing behind the miss is locked")
		assert.True(t, e.m.IsEvictable(4))
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventReadReserved, Keys: []int{1, 2}}}, e.rec.take())
	})
	t.Run("stops_at_the_first_write_locked_key", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 3}, obj)
		e.reserve(t, []int{2}, obj)
		rs, n := e.readPrefix(t, []int{1, 2, 3}, 1)
		assert.Equal(t, 1, n)
		assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotReadable, l1.Skipped}, statuses(rs))
		assert.Equal(t, 0, e.state(t, 2).ReadLocks)
		assert.True(t, e.state(t, 2).WriteLocked)
		assert.Equal(t, 0, e.state(t, 3).ReadLocks)
	})
	t.Run("does_not_touch_keys_behind_the_miss", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{3}, obj)
		e.put(t, []int{1}, obj)
		e.put(t, []int{9}, obj) // 3 is the least recently used
		e.readPrefix(t, []int{1, 2, 3}, 1)
		assert.Equal(t, []int{3, 9, 1}, e.snapshotKeys(), "only the locked key became most recently used")
	})
	t.Run("every_key_readable", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2, 3}, obj)
		rs, n := e.readPrefix(t, []int{1, 2, 3}, 2)
		assert.Equal(t, 3, n)
		assert.Equal(t, repeat(l1.OK, 3), statuses(rs))
		for _, k := range []int{1, 2, 3} {
			assert.Equal(t, 2, e.state(t, k).ReadLocks)
		}
		assert.Equal(t, repeat(l1.OK, 3), e.finishRead(t, []int{1, 2, 3}, 2))
	})
	t.Run("first_key_missing_locks_nothing_and_reports_nothing", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{2}, obj)
		e.rec.take()
		rs, n := e.readPrefix(t, []int{1, 2}, 1)
		assert.Equal(t, 0, n)
		assert.Equal(t, []l1.Status{l1.KeyNotExist, l1.Skipped}, statuses(rs))
		assert.Empty(t, e.rec.take())
	})
	t.Run("no_keys", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		rs, n := e.readPrefix(t, nil, 1)
		assert.Equal(t, 0, n)
		assert.Empty(t, rs)
		assert.Empty(t, e.rec.take())
	})
	t.Run("repeated_key_is_locked_per_occurrence", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		rs, n := e.readPrefix(t, []int{1, 1}, 1)
		assert.Equal(t, 2, n)
		assert.Equal(t, rs[0].Lease, rs[1].Lease)
		assert.Equal(t, 2, e.state(t, 1).ReadLocks)
	})
	t.Run("agrees_with_ReserveRead_on_the_prefix", func(t *testing.T) {
		a := newEnv(t, 64*KiB, l1.Config{})
		b := newEnv(t, 64*KiB, l1.Config{})
		for _, e := range []*env{a, b} {
			e.put(t, []int{1, 2, 4}, obj)
		}
		rs, n := a.readPrefix(t, []int{1, 2, 3, 4}, 1)
		ref := b.read(t, []int{1, 2}, 1)
		assert.Equal(t, ref, rs[:n])
		sa, sb := a.m.Stats(), b.m.Stats()
		assert.Equal(t, l1.LookupCounts{Calls: 1, Hits: 2, Misses: 1, Skipped: 1}, sa.Lookups[l1.LookupReadPrefix])
		assert.Equal(t, l1.LookupCounts{Calls: 1, Hits: 2}, sb.Lookups[l1.LookupRead])
		sa.Lookups[l1.LookupReadPrefix], sb.Lookups[l1.LookupRead] = l1.LookupCounts{}, l1.LookupCounts{}
		assert.Equal(t, sb, sa, "the same state and counters, but for the lookups' kinds")
	})
	t.Run("locks_edges", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.rec.take()
		for _, locks := range []int{0, -1, l1.MaxReadLocks + 1, math.MaxInt64, math.MinInt64} {
			rs, n, err := e.m.ReserveReadPrefix([]int{1}, locks)
			require.ErrorIs(t, err, l1.ErrInvalidArgument, "locks %d", locks)
			assert.Nil(t, rs)
			assert.Zero(t, n)
			leases, n, err := e.m.AppendReadPrefix(nil, []int{1}, locks)
			require.ErrorIs(t, err, l1.ErrInvalidArgument, "locks %d", locks)
			assert.Nil(t, leases)
			assert.Zero(t, n)
		}
		assert.Equal(t, 0, e.state(t, 1).ReadLocks, "a rejected call changes nothing")
		assert.Empty(t, e.rec.take())
		_, n := e.readPrefix(t, []int{1}, 1)
		assert.Equal(t, 1, n)
		_, n = e.readPrefix(t, []int{1}, l1.MaxReadLocks-1)
		assert.Equal(t, 1, n)
		assert.Equal(t, l1.MaxReadLocks, e.state(t, 1).ReadLocks)
	})
	t.Run("after_close", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		require.NoError(t, e.m.Close())
		_, _, err := e.m.ReserveReadPrefix([]int{1}, 1)
		assert.ErrorIs(t, err, l1.ErrClosed)
		_, _, err = e.m.ReserveReadPrefix(nil, 1)
		assert.ErrorIs(t, err, l1.ErrClosed)
		leases, _, err := e.m.AppendReadPrefix([]l1.Lease{7}, []int{1}, 1)
		assert.ErrorIs(t, err, l1.ErrClosed)
		assert.Equal(t, []l1.Lease{7}, leases, "leases come back as given")
	})
	t.Run("locked_prefix_is_not_evicted", func(t *testing.T) {
		// Four objects fill the pool; the prefix 1, 2 is read-locked, so a
		// write that needs room evicts 4, the least recently used key
		// behind the miss, and then 3: never the locked ones.
		e := newEnv(t, 4*obj, l1.Config{EvictOnDemand: true})
		e.put(t, []int{4}, obj)
		e.put(t, []int{3}, obj)
		e.put(t, []int{1, 2}, obj)
		e.del([]int{3}, false)
		e.put(t, []int{3}, obj) // 4 least recent, then 1, 2, 3
		_, n := e.readPrefix(t, []int{1, 2, 5, 3}, 1)
		require.Equal(t, 2, n)
		rs := e.reserve(t, []int{5, 6}, obj)
		assert.Equal(t, repeat(l1.OK, 2), statuses(rs))
		_, ok4 := e.m.State(4)
		_, ok3 := e.m.State(3)
		assert.False(t, ok4)
		assert.False(t, ok3)
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
		assert.Equal(t, 1, e.state(t, 2).ReadLocks)
	})
}

// Two actors on one key: both read the prefix, and share the epoch's
// lease; a writer cannot take the key while either holds it.
func TestReserveReadPrefixTwoReadersShareTheEpoch(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1, 2}, obj)
	a, n := e.readPrefix(t, []int{1, 2}, 1)
	require.Equal(t, 2, n)
	b, n := e.readPrefix(t, []int{1, 3}, 1)
	require.Equal(t, 1, n)
	assert.Equal(t, a[0].Lease, b[0].Lease)
	assert.Equal(t, 2, e.state(t, 1).ReadLocks)
	rs, err := e.m.ReserveWrite([]int{1}, nil, obj, l1.ModeAll)
	require.NoError(t, err)
	assert.Equal(t, l1.KeyNotWritable, rs[0].Status, "read-locked")
	st, err := e.m.FinishRead([]int{1}, []l1.Lease{b[0].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, st)
	st, err = e.m.FinishRead([]int{1, 2}, []l1.Lease{a[0].Lease, a[1].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK, l1.OK}, st)
	assert.True(t, e.m.IsEvictable(1))
}

// Reader A's prefix lock lapses; reader B locks the prefix again; A's
// late FinishRead must not release B's hold.
func TestReserveReadPrefixLateReaderCannotReleaseTheNextEpoch(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{ReadTTL: 5 * time.Second})
	e.put(t, []int{1, 2}, obj)
	a, _ := e.readPrefix(t, []int{1, 2}, 1)
	e.clk.Advance(6 * time.Second)
	b, n := e.readPrefix(t, []int{1, 2}, 1)
	require.Equal(t, 2, n)
	assert.NotEqual(t, a[0].Lease, b[0].Lease, "a new epoch after the lapse")
	st, err := e.m.FinishRead([]int{1, 2}, []l1.Lease{a[0].Lease, a[1].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease, l1.StaleLease}, st)
	assert.Equal(t, 1, e.state(t, 1).ReadLocks, "B's hold stands")
	st, err = e.m.FinishRead([]int{1, 2}, []l1.Lease{b[0].Lease, b[1].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK, l1.OK}, st)
}

// A clock that jumps back neither lapses nor extends the prefix's read
// locks; forward time does.
func TestReserveReadPrefixClockJumps(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{ReadTTL: 10 * time.Second})
	e.put(t, []int{1}, obj)
	a, _ := e.readPrefix(t, []int{1}, 1)
	e.clk.Advance(4 * time.Second)
	e.m.Len()
	e.clk.Advance(-200 * 365 * 24 * time.Hour)
	assert.Equal(t, 1, e.state(t, 1).ReadLocks, "a jump back does not lapse the lock")
	e.clk.Advance(5 * time.Second)
	assert.Equal(t, 1, e.state(t, 1).ReadLocks)
	e.clk.Advance(time.Second)
	assert.Equal(t, 0, e.state(t, 1).ReadLocks, "10 s of forward time lapse it")
	b, n := e.readPrefix(t, []int{1}, 1)
	require.Equal(t, 1, n)
	assert.NotEqual(t, a[0].Lease, b[0].Lease)
}

// A write that lapses turns the key missing: the prefix then stops there.
func TestReserveReadPrefixStopsAtAReclaimedWrite(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: time.Second})
	e.put(t, []int{1}, obj)
	e.reserve(t, []int{2}, obj)
	e.put(t, []int{3}, obj)
	e.clk.Advance(2 * time.Second)
	rs, n := e.readPrefix(t, []int{1, 2, 3}, 1)
	assert.Equal(t, 1, n)
	assert.Equal(t, []l1.Status{l1.OK, l1.KeyNotExist, l1.Skipped}, statuses(rs))
}

// A listener that calls back into the manager, slowly, from the event of a
// prefix read: the caller delivers its own events before it returns.
func TestReserveReadPrefixSlowReentrantListener(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1, 2}, obj)
	var mu sync.Mutex
	var seen []int
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		if ev.Kind != l1.EventReadReserved {
			return
		}
		time.Sleep(10 * time.Millisecond)
		s, ok := e.m.State(ev.Keys[0])
		mu.Lock()
		defer mu.Unlock()
		if ok {
			seen = append(seen, s.ReadLocks)
		}
		ev.Keys[0] = -1 // each listener owns its slice
	})
	_, n := e.readPrefix(t, []int{1, 2, 3}, 1)
	require.Equal(t, 2, n)
	mu.Lock()
	assert.Equal(t, []int{1}, seen, "delivered before the call returned")
	mu.Unlock()
	assert.Equal(t, []int{1, 2}, e.rec.last(l1.EventReadReserved))
}

// Concurrent prefix readers and writers of the same chain: every lease a
// reader gets releases its lock, and no byte is lost.
func TestReserveReadPrefixConcurrent(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{0, 1, 2, 3}, obj)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var leases []l1.Lease
			for i := range 200 {
				ks := []int{0, 1, 2, 3, 4 + (w+i)%3}
				var n int
				var err error
				leases, n, err = e.m.AppendReadPrefix(leases[:0], ks, 1)
				if !assert.NoError(t, err) || !assert.GreaterOrEqual(t, n, 4) {
					return
				}
				st, err := e.m.FinishRead(ks[:n], leases, 1)
				if !assert.NoError(t, err) || !assert.Equal(t, repeat(l1.OK, n), st) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for k := range 4 {
		assert.Equal(t, 0, e.state(t, k).ReadLocks)
	}
	assert.Equal(t, 4*obj, e.used())
}

func TestAppendReadPrefix(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1, 2, 4}, obj)
	e.rec.take()
	leases, n, err := e.m.AppendReadPrefix([]l1.Lease{99}, []int{1, 2, 3, 4}, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, append([]l1.Lease{99}, e.rl([]int{1, 2})...), leases)
	assert.Equal(t, 0, e.state(t, 4).ReadLocks)
	assert.Equal(t, []l1.Event[int]{{Kind: l1.EventReadReserved, Keys: []int{1, 2}}}, e.rec.take())
}

// With room in leases and no listener, the prefix read allocates nothing.
func TestAppendReadPrefixAllocatesNothing(t *testing.T) {
	a := newAlloc(t, 64*KiB, 4*KiB)
	m, err := l1.New[int](a, l1.Config{})
	require.NoError(t, err)
	ks := []int{1, 2, 3}
	rs, err := m.ReserveWrite(ks, nil, obj, l1.ModeAll)
	require.NoError(t, err)
	_, err = m.FinishWrite(ks, []l1.Lease{rs[0].Lease, rs[1].Lease, rs[2].Lease})
	require.NoError(t, err)
	if invariants.Enabled {
		t.Skip("the invariants build verifies the manager after every call, and the check allocates")
	}
	leases := make([]l1.Lease, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		var n int
		leases, n, _ = m.AppendReadPrefix(leases[:0], []int{1, 2, 9}, 1)
		if n != 2 {
			require.Fail(t, fmt.Sprintf("n = %d", n))
		}
		if _, err := m.FinishRead(ks[:2], leases, 1); err != nil {
			require.NoError(t, err)
		}
	})
	// FinishRead returns its statuses in a new slice: one allocation.
	assert.LessOrEqual(t, allocs, 1.0)
}
