package l1_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/l1"
)

func TestListeners(t *testing.T) {
	t.Run("events_follow_the_operations", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1, 2}, obj)
		e.finish([]int{1, 2, 3})
		e.read(t, []int{2}, 1)
		e.finishRead(t, []int{2}, 1)
		e.touch([]int{1})
		e.del([]int{1, 2}, false)
		assert.Equal(t, []l1.Event[int]{
			{Kind: l1.EventWriteReserved, Keys: []int{1, 2}},
			{Kind: l1.EventWriteFinished, Keys: []int{1, 2}},
			{Kind: l1.EventReadReserved, Keys: []int{2}},
			{Kind: l1.EventReadFinished, Keys: []int{2}},
			{Kind: l1.EventAccessed, Keys: []int{1}},
			{Kind: l1.EventRemoved, Cause: l1.CauseDeleted, Keys: []int{1, 2}},
		}, e.rec.take())
	})
	t.Run("no_event_for_an_empty_key_list", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.finish([]int{1})
		e.read(t, []int{1}, 1)
		e.del([]int{1}, true)
		e.touch([]int{1})
		e.reserve(t, []int{1}, 65*KiB)
		assert.Empty(t, e.rec.take())
	})
	t.Run("reentrant_calls_are_delivered_after_the_current_listener", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		var order []string
		e.m.AddListenerFunc(func(ev l1.Event[int]) {
			order = append(order, "begin "+ev.Kind.String())
			if ev.Kind == l1.EventWriteReserved {
				assert.Equal(t, []l1.Status{l1.OK}, e.finish(ev.Keys))
				s, ok := e.m.State(ev.Keys[0])
				assert.True(t, ok)
				assert.True(t, s.Finished)
			}
			order = append(order, "end "+ev.Kind.String())
		})
		e.reserve(t, []int{1}, obj)
		assert.Equal(t, []string{"begin write-reserved", "end write-reserved", "begin write-finished", "end write-finished"}, order)
	})
	t.Run("added_listener_sees_later_operations_only", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.reserve(t, []int{1}, obj)
		late := &recorder{}
		e.m.AddListenerFunc(late.listen)
		e.m.AddListener(nil)
		e.finish([]int{1})
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteFinished, Keys: []int{1}}}, late.take())
	})
	t.Run("a_panicking_listener_does_not_stop_delivery", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		boom := true
		e.m.AddListenerFunc(func(ev l1.Event[int]) {
			if boom {
				boom = false
				panic("listener")
			}
		})
		assert.Panics(t, func() { e.reserve(t, []int{1}, obj) })
		e.rec.take()
		assert.Equal(t, []l1.Status{l1.OK}, e.finish([]int{1}))
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteFinished, Keys: []int{1}}}, e.rec.take())
	})
	t.Run("serialized_and_ordered_under_concurrency", func(t *testing.T) {
		e := newEnv(t, 4*MiB, l1.Config{})
		var inFlight, maxInFlight atomic.Int32
		var mu sync.Mutex
		seen := map[int][]l1.EventKind{}
		e.m.AddListenerFunc(func(ev l1.Event[int]) {
			n := inFlight.Add(1)
			if n > maxInFlight.Load() {
				maxInFlight.Store(n)
			}
			mu.Lock()
			for _, k := range ev.Keys {
				seen[k] = append(seen[k], ev.Kind)
			}
			mu.Unlock()
			e.m.Stats() // a call back into the manager
			inFlight.Add(-1)
		})
		const workers, perWorker = 8, 40
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					k := w*perWorker + i
					rs, err := e.m.ReserveWrite([]int{k}, nil, obj, l1.ModeAll)
					if err != nil || rs[0].Status != l1.OK {
						assert.Fail(t, fmt.Sprintf("reserve %d: %v %v", k, rs, err))
						return
					}
					e.finish([]int{k})
					e.m.ReserveRead([]int{k}, 1)
					e.fr([]int{k}, 1)
					e.del([]int{k}, false)
				}
			}()
		}
		wg.Wait()
		e.m.Len() // an operation that finds the queue idle delivers the rest
		assert.Equal(t, int32(1), maxInFlight.Load(), "listener calls overlapped")
		want := []l1.EventKind{l1.EventWriteReserved, l1.EventWriteFinished, l1.EventReadReserved, l1.EventReadFinished, l1.EventRemoved}
		require.Len(t, seen, workers*perWorker)
		for k, kinds := range seen {
			assert.Equal(t, want, kinds, "key %d", k)
		}
	})
}

// callLog implements Listener with one method per callback, as a caller
// embedding the manager in a cache would.
type callLog struct{ calls []string }

func (c *callLog) add(name string, keys []int) {
	c.calls = append(c.calls, fmt.Sprint(name, keys))
}
func (c *callLog) WriteReserved(keys []int)             { c.add("WriteReserved", keys) }
func (c *callLog) WriteFinished(keys []int)             { c.add("WriteFinished", keys) }
func (c *callLog) WriteFinishedReadReserved(keys []int) { c.add("WriteFinishedReadReserved", keys) }
func (c *callLog) ReadReserved(keys []int)              { c.add("ReadReserved", keys) }
func (c *callLog) ReadFinished(keys []int)              { c.add("ReadFinished", keys) }
func (c *callLog) Removed(keys []int, cause l1.Cause)   { c.add("Removed/"+cause.String(), keys) }
func (c *callLog) Accessed(keys []int)                  { c.add("Accessed", keys) }

func TestListenerInterfaceCallbacks(t *testing.T) {
	// Room for 3 objects: the 4-key reservation grants a prefix of 3.
	e := newEnv(t, 3*obj, l1.Config{})
	log := &callLog{}
	e.m.AddListener(log)
	res, err := e.m.ReserveWrite([]int{1, 2, 3, 4}, nil, obj, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, l1.OutOfMemory, res[3].Status)
	e.finish([]int{1, 9})
	_, err = e.fwrr([]int{2}, 1)
	require.NoError(t, err)
	e.read(t, []int{1}, 2)
	e.finishRead(t, []int{1}, 2)
	e.touch([]int{1, 2})
	e.abort([]int{3})
	e.del([]int{1, 2}, true)
	assert.Equal(t, []string{
		"WriteReserved[1 2 3]",
		"WriteFinished[1]",
		"WriteFinishedReadReserved[2]",
		"ReadReserved[1]",
		"ReadFinished[1]",
		"Accessed[1 2]",
		"Removed/aborted[3]",
		"Removed/deleted[1 2]",
	}, log.calls)
}

// Keys a call re-locks are reported to listeners, whether or not the call
// allocated anything (nothing to allocate; update mode).
// From LMCache, whose early returns skipped these notifications.
func TestRelockedKeysAreReported(t *testing.T) {
	t.Run("update_mode", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1}, obj)
		e.rec.take()
		_, err := e.m.ReserveWrite([]int{1, 2}, nil, obj, l1.ModeUpdate)
		require.NoError(t, err)
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteReserved, Keys: []int{1}}}, e.rec.take())
	})
	t.Run("nothing_to_allocate", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{1, 2}, obj)
		e.rec.take()
		e.reserve(t, []int{2, 1}, obj)
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteReserved, Keys: []int{2, 1}}}, e.rec.take())
	})
	t.Run("mixed_in_request_order", func(t *testing.T) {
		e := newEnv(t, 64*KiB, l1.Config{})
		e.put(t, []int{2}, obj)
		e.rec.take()
		e.reserve(t, []int{1, 2, 3}, obj)
		assert.Equal(t, []l1.Event[int]{{Kind: l1.EventWriteReserved, Keys: []int{1, 2, 3}}}, e.rec.take())
	})
}

// A listener may call back into the manager itself, and may wait for another
// goroutine's call that makes no event (a read, State, Stats); see Listener
// for why it must not wait for another goroutine's call that does.
// From LMCache, whose listeners ran inside its global lock.
func TestListenersRunOutsideTheLock(t *testing.T) {
	e := newEnv(t, 64*KiB, l1.Config{})
	var nested []l1.Status
	var seen l1.ObjectState
	e.m.AddListenerFunc(func(ev l1.Event[int]) {
		if ev.Kind != l1.EventWriteReserved {
			return
		}
		done := make(chan l1.ObjectState)
		go func() {
			s, _ := e.m.State(ev.Keys[0])
			e.unsafeRead(ev.Keys)
			done <- s
		}()
		seen = <-done
		nested = e.finish(ev.Keys)
	})
	e.reserve(t, []int{1, 2}, obj)
	assert.True(t, seen.WriteLocked)
	assert.Equal(t, []l1.Status{l1.OK, l1.OK}, nested)
	assert.Equal(t, []l1.Event[int]{
		{Kind: l1.EventWriteReserved, Keys: []int{1, 2}},
		{Kind: l1.EventWriteFinished, Keys: []int{1, 2}},
	}, e.rec.take())
}

// Two listeners that append to their Keys must not write into one slot.
// From a hostile review.
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

// A listener that takes 20 µs and 8 callers: every caller returns, each only
// after its own events were delivered, and the backlog of undelivered events
// stays bounded.
// From a hostile review (a slow listener).
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
					assert.Fail(t, fmt.Sprintf("caller returned before its events were delivered (key %d)", k))
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
		require.Fail(t, "a caller did not return 10 s after the load stopped")
	}
	<-monitorDone
	st := e.m.Stats()
	assert.Zero(t, st.PendingEvents)
	assert.LessOrEqual(t, maxPending.Load(), int64(callers), "undelivered events, sampled")
	assert.LessOrEqual(t, st.PeakPendingEvents, uint64(callers), "one event per waiting caller at most")
	assert.NotZero(t, st.PeakPendingEvents)
}

// A listener that calls back into the manager from its own goroutine does
// not deadlock, also while other goroutines wait for their turn; the nested
// call's events follow, in order.
// From a hostile review (a slow listener).
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
