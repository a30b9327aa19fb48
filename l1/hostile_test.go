package l1_test

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// Regression tests for the defects a hostile review found: two actors on
// one key, extreme TTLs, clocks that jump, slow listeners.

// Writer A reserves k and its lock lapses; writer B reserves k again and
// gets the same block; A's late FinishWrite must not commit B's half-written
// object.
func TestLateWriterCannotCommitAnotherWritersReservation(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 10 * time.Second})
	a := e.reserve(t, []int{1}, obj)
	require.Equal(t, l1.OK, a[0].Status)
	e.clk.Advance(11 * time.Second) // A's lock lapses
	b := e.reserve(t, []int{1}, obj)
	require.Equal(t, l1.OK, b[0].Status)
	require.Equal(t, a[0].Block.Offset, b[0].Block.Offset, "B got the same memory")
	require.NotEqual(t, a[0].Block.Gen, b[0].Block.Gen, "under a new handle generation")
	require.NotEqual(t, a[0].Lease, b[0].Lease)
	st, err := e.m.FinishWrite([]int{1}, []l1.Lease{a[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease}, st, "A's late FinishWrite")
	s := e.state(t, 1)
	assert.True(t, s.WriteLocked, "B's reservation still stands")
	assert.False(t, s.Finished, "nothing committed")

	// Nor can A abort it, or finish it into a read lock.
	st, err = e.m.AbortWrite([]int{1}, []l1.Lease{a[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease}, st)
	rs, err := e.m.FinishWriteAndReserveRead([]int{1}, []l1.Lease{a[0].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Result{{Status: l1.StaleLease}}, rs)
	assert.True(t, e.state(t, 1).WriteLocked)

	// B, with its own lease, commits.
	st, err = e.m.FinishWrite([]int{1}, []l1.Lease{b[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, st)
	// A lease is good once: B's second FinishWrite finds nothing to finish.
	st, err = e.m.FinishWrite([]int{1}, []l1.Lease{b[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.KeyInWrongState}, st)
}

// Reader A's read lock lapses; reader B locks the key again; A's late
// FinishRead must not release B's hold.
func TestLateReaderCannotReleaseAnotherReadersLock(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{ReadTTL: 5 * time.Second})
	e.putTemp(t, []int{2}, obj) // a temporary object: a release to 0 frees it
	e.put(t, []int{1}, obj)
	a := e.read(t, []int{1, 2}, 1)
	e.clk.Advance(6 * time.Second) // A's locks lapse (the temporary object 2 is reclaimed)
	b := e.read(t, []int{1}, 1)
	require.Equal(t, l1.OK, b[0].Status)
	require.NotEqual(t, a[0].Lease, b[0].Lease, "a new epoch after the lapse")
	st, err := e.m.FinishRead([]int{1, 2}, []l1.Lease{a[0].Lease, a[1].Lease}, 1)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease, l1.KeyNotExist}, st)
	assert.Equal(t, 1, e.state(t, 1).ReadLocks, "B's hold stands")
	// A second reader of B's epoch shares B's lease.
	c := e.read(t, []int{1}, 2)
	assert.Equal(t, b[0].Lease, c[0].Lease)
	st, err = e.m.FinishRead([]int{1}, []l1.Lease{c[0].Lease}, 3)
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, st)
}

func TestLeasesOfTheWrongLengthAreRejected(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	rs := e.reserve(t, []int{1, 2}, obj)
	before := e.m.Snapshot()
	_, err := e.m.FinishWrite([]int{1, 2}, []l1.Lease{rs[0].Lease})
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	_, err = e.m.AbortWrite([]int{1}, nil)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	_, err = e.m.FinishWriteAndReserveRead([]int{1}, []l1.Lease{1, 2}, 1)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	_, err = e.m.FinishRead([]int{1}, nil, 1)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
	assert.Equal(t, before, e.m.Snapshot(), "nothing changed")
	// Lease 0 never matches.
	st, err := e.m.FinishWrite([]int{1}, []l1.Lease{0})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.StaleLease}, st)
}

// Leases are unique and grow; every granted key of a batch gets its own.
func TestWriteLeasesAreUniqueAndGrow(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1}, obj)
	rs := e.reserve(t, []int{2, 1, 3}, obj) // 2 and 3 allocated, 1 re-locked
	seen := map[l1.Lease]bool{}
	for _, r := range rs {
		require.Equal(t, l1.OK, r.Status)
		assert.NotZero(t, r.Lease)
		assert.False(t, seen[r.Lease], "lease %d handed out twice", r.Lease)
		seen[r.Lease] = true
	}
	assert.Less(t, rs[0].Lease, rs[2].Lease, "allocated keys in request order")
	assert.Less(t, rs[2].Lease, rs[1].Lease, "then re-locked keys")
}

func TestTTLOfMaxInt64NeverLapses(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: l1.NoExpiry, ReadTTL: math.MaxInt64})
	rs := e.reserve(t, []int{1, 2}, obj)
	e.clk.Advance(time.Nanosecond)
	st, err := e.m.FinishWrite([]int{1}, []l1.Lease{rs[0].Lease})
	require.NoError(t, err)
	assert.Equal(t, []l1.Status{l1.OK}, st, "write lock still held")
	e.read(t, []int{1}, 1)
	e.clk.Advance(time.Nanosecond)
	assert.Equal(t, []l1.Status{l1.KeyIsLocked}, e.del([]int{1}, false), "read lock still held")
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Zero(t, n, "a read-locked object is not evicted")
	assert.True(t, e.state(t, 2).WriteLocked)
	// Not after 1000 years either.
	for range 4 {
		e.clk.Advance(250 * 365 * 24 * time.Hour)
		assert.True(t, e.state(t, 2).WriteLocked)
		assert.Equal(t, 1, e.state(t, 1).ReadLocks)
	}
}

func TestTTLOfOneNanosecond(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 1, ReadTTL: 1})
	e.reserve(t, []int{1}, obj)
	assert.True(t, e.state(t, 1).WriteLocked, "held at the instant it was taken")
	e.clk.Advance(time.Nanosecond)
	_, ok := e.m.State(1)
	assert.False(t, ok, "lapsed and reclaimed 1 ns later")
	assert.Zero(t, e.used())
}

// A clock that jumps backwards by any amount neither lapses nor revives a
// lock; one that jumps forward by any amount lapses every finite lock.
func TestClockJumps(t *testing.T) {
	for _, back := range []time.Duration{time.Second, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
		t.Run("back_"+back.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 10 * time.Second})
			rs := e.reserve(t, []int{1}, obj)
			e.clk.Advance(4 * time.Second)
			e.m.Len() // the manager reads the clock at +4 s
			e.clk.Advance(-back)
			s := e.state(t, 1)
			assert.True(t, s.WriteLocked, "a jump back does not lapse the lock")
			assert.Equal(t, 6*time.Second, s.WriteExpiry.Sub(e.clk.Now()), "nor extend it")
			e.clk.Advance(5 * time.Second)
			assert.True(t, e.state(t, 1).WriteLocked)
			e.clk.Advance(time.Second)
			_, ok := e.m.State(1)
			assert.False(t, ok, "the lock lapses 10 s of forward time after it was taken")
			st, err := e.m.FinishWrite([]int{1}, []l1.Lease{rs[0].Lease})
			require.NoError(t, err)
			assert.Equal(t, []l1.Status{l1.KeyNotExist}, st)
		})
	}
	for _, fwd := range []time.Duration{11 * time.Second, 200 * 365 * 24 * time.Hour, math.MaxInt64} {
		t.Run("forward_"+fwd.String(), func(t *testing.T) {
			e := newEnv(t, 64*KiB, l1.Config{WriteTTL: 10 * time.Second, ReadTTL: l1.NoExpiry})
			e.reserve(t, []int{1}, obj)
			e.put(t, []int{2}, obj)
			e.read(t, []int{2}, 1)
			e.clk.Advance(fwd)
			e.clk.Advance(fwd)
			_, ok := e.m.State(1)
			assert.False(t, ok, "the write lock lapsed")
			assert.Equal(t, 1, e.state(t, 2).ReadLocks, "a lock that never expires still holds")
			assert.Equal(t, obj, e.used())
		})
	}
}

// A temporary object finished and never read holds no lock; 24 hours
// later EvictTo(0) must reclaim it, as LMCache would.
func TestFinishedTemporaryObjectIsEvictable(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.putTemp(t, []int{1}, obj)
	e.clk.Advance(24 * time.Hour)
	assert.True(t, e.m.IsEvictable(1))
	n, err := e.m.EvictTo(0)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.Zero(t, e.used())

	t.Run("on_demand", func(t *testing.T) {
		e := newEnv(t, 2*obj, l1.Config{EvictOnDemand: true})
		e.putTemp(t, []int{1, 2}, obj)
		rs := e.reserve(t, []int{3}, obj)
		assert.Equal(t, l1.OK, rs[0].Status)
		_, ok := e.m.State(1)
		assert.False(t, ok, "the least recently used temporary object was evicted")
	})
}

// A ModeAll batch with temporary=true re-locks cached objects without
// turning them into read-once objects.
func TestRelockKeepsTheObjectsTemporaryFlag(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1}, obj)
	rs, err := e.m.ReserveWrite([]int{1, 2}, []bool{true, true}, obj, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, []l1.Status{l1.OK, l1.OK}, statuses(rs))
	assert.False(t, e.state(t, 1).Temporary, "the cached object keeps its own flag")
	assert.True(t, e.state(t, 2).Temporary, "a new object takes the call's flag")
}

// Two listeners that append to their Keys must not write into one slot.
func TestEachListenerGetsItsOwnKeys(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	var first, second []int
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		if ev.Kind == l1.EventWriteReserved {
			first = append(ev.Keys[:1:1], 100)
			ev.Keys[0] = -1
		}
	})
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		if ev.Kind == l1.EventWriteReserved {
			second = append(ev.Keys, 200)
		}
	})
	e.reserve(t, []int{1, 2}, obj)
	assert.Equal(t, []int{1, 100}, first)
	assert.Equal(t, []int{1, 2, 200}, second, "the second listener sees the keys the first one did not change")
	assert.Equal(t, []int{1, 2}, e.rec.last(l1.EventWriteReserved), "the recorder (first registered) keeps its own")
}

func TestNewRejectsATypedNilAllocator(t *testing.T) {
	var a *allocator.Allocator
	_, err := l1.New[int](a, l1.Config{})
	require.ErrorIs(t, err, l1.ErrInvalidArgument)
}

// After Close a read-side call must not answer KeyNotExist with a nil
// error: "closed" is not a miss.
func TestReadSideCallsAfterCloseReturnErrClosed(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	e.put(t, []int{1}, obj)
	require.NoError(t, e.m.Close())
	one := []l1.Lease{1}
	_, err := e.m.ReserveRead([]int{1}, 1)
	assert.ErrorIs(t, err, l1.ErrClosed, "ReserveRead")
	_, err = e.m.FinishRead([]int{1}, one, 1)
	assert.ErrorIs(t, err, l1.ErrClosed, "FinishRead")
	_, err = e.m.FinishWriteAndReserveRead([]int{1}, one, 1)
	assert.ErrorIs(t, err, l1.ErrClosed, "FinishWriteAndReserveRead")
	_, err = e.m.FinishWrite([]int{1}, one)
	assert.ErrorIs(t, err, l1.ErrClosed, "FinishWrite")
	_, err = e.m.AbortWrite([]int{1}, one)
	assert.ErrorIs(t, err, l1.ErrClosed, "AbortWrite")
	_, err = e.m.UnsafeRead([]int{1})
	assert.ErrorIs(t, err, l1.ErrClosed, "UnsafeRead")
	_, err = e.m.Delete([]int{1}, true)
	assert.ErrorIs(t, err, l1.ErrClosed, "Delete")
	assert.ErrorIs(t, e.m.Touch([]int{1}), l1.ErrClosed, "Touch")
	_, err = e.m.ReserveWrite([]int{1}, nil, obj, l1.ModeAll)
	assert.ErrorIs(t, err, l1.ErrClosed, "ReserveWrite")
	_, err = e.m.EvictTo(0)
	assert.ErrorIs(t, err, l1.ErrClosed, "EvictTo")
	// Bad arguments are still named as such.
	_, err = e.m.FinishRead([]int{1}, nil, 1)
	assert.ErrorIs(t, err, l1.ErrInvalidArgument)
}

// A listener that takes 20 µs and 8 callers: every caller returns, each
// only after its own events were delivered, and the backlog of undelivered
// events stays bounded.
func TestSlowListenerBacklogIsBounded(t *testing.T) {
	e := newEnv(t, 64*MiB, l1.Config{})
	var delivered sync.Map // key -> number of events delivered for it
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		for _, k := range ev.Keys {
			n, _ := delivered.LoadOrStore(k, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		}
		time.Sleep(20 * time.Microsecond)
	})
	const callers = 8
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var maxPending atomic.Int64
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p := int64(e.m.Stats().PendingEvents); p > maxPending.Load() {
				maxPending.Store(p)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}()
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := w<<20 | i
				e.touch([]int{k}) // no object: no event, never waits
				e.reserve(t, []int{k}, obj)
				e.del([]int{k}, true)
				// Both events of this goroutine's key were delivered.
				n, _ := delivered.Load(k)
				if n == nil || n.(*atomic.Int32).Load() != 2 {
					t.Errorf("caller returned before its events were delivered (key %d)", k)
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a caller did not return 10 s after the load stopped")
	}
	<-monitorDone
	st := e.m.Stats()
	assert.Zero(t, st.PendingEvents)
	assert.LessOrEqual(t, maxPending.Load(), int64(callers), "undelivered events, sampled")
	assert.LessOrEqual(t, st.PeakPendingEvents, uint64(callers), "one event per waiting caller at most")
	assert.NotZero(t, st.PeakPendingEvents)
}

// A listener that calls back into the manager from its own goroutine does
// not deadlock, also while other goroutines wait for their turn; the
// nested call's events follow, in order.
func TestReentrantListenerUnderLoad(t *testing.T) {
	e := newEnv(t, 64*MiB, l1.Config{})
	var mu sync.Mutex
	seen := map[int][]l1.EventKind{}
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		mu.Lock()
		for _, k := range ev.Keys {
			seen[k] = append(seen[k], ev.Kind)
		}
		mu.Unlock()
		if ev.Kind == l1.EventWriteReserved {
			e.finish(ev.Keys) // re-entrant: returns at once
		}
	})
	const callers = 8
	var wg sync.WaitGroup
	for w := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k := w<<20 | i
				e.reserve(t, []int{k}, obj)
				e.del([]int{k}, true)
			}
		}()
	}
	wg.Wait()
	e.m.Len()
	want := []l1.EventKind{l1.EventWriteReserved, l1.EventWriteFinished, l1.EventRemoved}
	require.Len(t, seen, callers*200)
	for k, kinds := range seen {
		require.Equal(t, want, kinds, "key %d", k)
	}
	assert.Zero(t, e.m.Stats().PendingEvents)
}
