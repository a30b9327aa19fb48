package l1_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

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
						t.Errorf("reserve %d: %v %v", k, rs, err)
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
