package l1check

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/l1ref"
	"github.com/kvalloc/kvalloc/l1"
)

// Outcome is what one Op returned and what the system looked like right
// after it, in a form that the manager and the model both produce, so a
// state-machine test can predict it from the model alone (ModelDo) and
// compare it with the manager's (Do).
type Outcome struct {
	Statuses  []l1.Status // FinishWrite, AbortWrite, FinishRead, Delete
	Results   []l1.Result // ReserveWrite, FinishWriteAndReserveRead, ReserveRead, UnsafeRead
	N         int         // Clear, EvictTo, Len, ReserveReadPrefix
	Evictable []bool      // IsEvictable, per key
	KeyStates []keyState  // State, per key, with IsEvictable
	Err       string      // "", "invalid", "closed", or the unexpected error

	// Read without reclaiming expired objects: Usage and Stats.
	Held, Capacity                       int64
	Objects, WriteLocked, TempReadLocked int
	Quarantined                          int
	QuarantinedBytes                     int64
	// Counters are those the model keeps (l1ref.Counted).
	Counters l1.Counters
	// Read after reclaiming, only when the Op observes: every object in
	// LRU order, and the free extents.
	States  []l1.Entry[Key]
	Extents []allocator.Block
}

// keyState is what State returned for one key.
type keyState struct {
	State l1.ObjectState
	Found bool
}

func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, l1.ErrInvalidArgument):
		return "invalid"
	case errors.Is(err, l1.ErrClosed):
		return "closed"
	}
	return err.Error()
}

// Do runs op on the manager only and returns its Outcome. The System's
// own model is left alone, except that clock advances move it too.
func (s *System) Do(op Op) Outcome {
	var o Outcome
	var err error
	m := s.M
	leases := s.Book.Leases(op)
	switch op.Kind {
	case OpReserveWrite:
		if op.Positions != nil {
			o.Results, err = m.ReserveWriteChain(op.Keys, op.Positions, op.Temporary, op.Size, op.Mode)
			break
		}
		o.Results, err = m.ReserveWrite(op.Keys, op.Temporary, op.Size, op.Mode)
	case OpFinishWrite:
		o.Statuses, err = m.FinishWrite(op.Keys, leases)
	case OpFinishWriteAndReserveRead:
		o.Results, err = m.FinishWriteAndReserveRead(op.Keys, leases, op.Locks)
	case OpAbortWrite:
		o.Statuses, err = m.AbortWrite(op.Keys, leases)
	case OpReserveRead:
		if op.Prefix {
			o.Results, o.N, err = m.ReserveReadPrefix(op.Keys, op.Locks)
			break
		}
		o.Results, err = m.ReserveRead(op.Keys, op.Locks)
	case OpUnsafeRead:
		o.Results, err = m.UnsafeRead(op.Keys)
	}
	for i := range o.Results { // the model predicts no generations
		o.Results[i] = withoutGen(o.Results[i])
	}
	switch op.Kind {
	case OpFinishRead:
		o.Statuses, err = m.FinishRead(op.Keys, leases, op.Locks)
	case OpDelete:
		o.Statuses, err = m.Delete(op.Keys, op.Force)
	case OpClear:
		o.N = m.Clear(op.Force)
	case OpTouch:
		err = m.Touch(op.Keys)
	case OpEvictTo:
		o.N, err = m.EvictTo(op.Ratio)
	case OpIsEvictable:
		for _, k := range op.Keys {
			o.Evictable = append(o.Evictable, m.IsEvictable(k))
			st, ok := m.State(k)
			o.KeyStates = append(o.KeyStates, keyState{st, ok})
		}
	case OpLen:
		o.N = m.Len()
	case OpAdvance:
		s.Advance(op.Advance)
	case OpClose:
		err = m.Close()
	}
	o.Err = errClass(err)
	s.Book.Record(op, o.Results, err)
	st := m.Stats()
	o.Held, o.Capacity = m.Usage()
	o.Objects, o.WriteLocked, o.TempReadLocked = st.Objects, st.WriteLocked, st.TemporaryReadLocked
	o.Quarantined, o.QuarantinedBytes = st.QuarantinedObjects, st.QuarantinedBytes
	o.Counters = l1ref.Counted(st.Counters)
	if op.Observe {
		o.States = m.Snapshot()
		o.Extents = s.A.FreeExtents()
	}
	return o
}

// ModelDo runs op on the model md, with the leases of the model's book,
// and returns the Outcome the manager must produce.
func ModelDo(md *l1ref.Manager[Key], book *Book, op Op) Outcome {
	var o Outcome
	var err error
	leases := book.Leases(op)
	switch op.Kind {
	case OpReserveWrite:
		if op.Positions != nil {
			o.Results, err = md.ReserveWriteChain(op.Keys, op.Positions, op.Temporary, op.Size, op.Mode)
			break
		}
		o.Results, err = md.ReserveWrite(op.Keys, op.Temporary, op.Size, op.Mode)
	case OpFinishWrite:
		o.Statuses, err = md.FinishWrite(op.Keys, leases)
	case OpFinishWriteAndReserveRead:
		o.Results, err = md.FinishWriteAndReserveRead(op.Keys, leases, op.Locks)
	case OpAbortWrite:
		o.Statuses, err = md.AbortWrite(op.Keys, leases)
	case OpReserveRead:
		if op.Prefix {
			o.Results, o.N, err = md.ReserveReadPrefix(op.Keys, op.Locks)
			break
		}
		o.Results, err = md.ReserveRead(op.Keys, op.Locks)
	case OpUnsafeRead:
		o.Results, err = md.UnsafeRead(op.Keys)
	case OpFinishRead:
		o.Statuses, err = md.FinishRead(op.Keys, leases, op.Locks)
	case OpDelete:
		o.Statuses, err = md.Delete(op.Keys, op.Force)
	case OpClear:
		o.N = md.Clear(op.Force)
	case OpTouch:
		err = md.Touch(op.Keys)
	case OpEvictTo:
		o.N, err = md.EvictTo(op.Ratio)
	case OpIsEvictable:
		for _, k := range op.Keys {
			o.Evictable = append(o.Evictable, md.IsEvictable(k))
			st, ok := md.State(k)
			o.KeyStates = append(o.KeyStates, keyState{st, ok})
		}
	case OpLen:
		md.Sweep()
		o.N = md.Len()
	case OpAdvance:
		md.Advance(op.Advance)
	case OpClose:
		md.Close()
	}
	o.Err = errClass(err)
	book.Record(op, o.Results, err)
	o.Held, o.Capacity = md.Used(), md.Mem.Capacity()
	o.Objects, o.WriteLocked, o.TempReadLocked = md.Len(), md.WriteLocked(), md.TemporaryReadLocked()
	o.Quarantined, o.QuarantinedBytes = md.Quarantine()
	o.Counters = md.Counters
	if op.Observe {
		o.States = md.Snapshot()
		o.Extents = runsOf(md.Mem)
	}
	return o
}

// CompareOutcome returns the first difference between the manager's
// outcome got and the model's want.
func CompareOutcome(got, want Outcome) error {
	switch {
	case got.Err != want.Err:
		return fmt.Errorf("error %q, model %q", got.Err, want.Err)
	case !slices.Equal(got.Statuses, want.Statuses):
		return fmt.Errorf("statuses %v, model %v", got.Statuses, want.Statuses)
	case !slices.Equal(got.Results, want.Results):
		for i := range min(len(got.Results), len(want.Results)) {
			if got.Results[i] != want.Results[i] {
				return fmt.Errorf("key #%d: %v %+v, model %v %+v", i, got.Results[i].Status, got.Results[i].Block, want.Results[i].Status, want.Results[i].Block)
			}
		}
		return fmt.Errorf("%d results, model %d", len(got.Results), len(want.Results))
	case got.N != want.N:
		return fmt.Errorf("returned %d, model %d", got.N, want.N)
	case !slices.Equal(got.Evictable, want.Evictable):
		return fmt.Errorf("evictable %v, model %v", got.Evictable, want.Evictable)
	case !slices.EqualFunc(got.KeyStates, want.KeyStates, func(a, b keyState) bool { return a.Found == b.Found && sameState(a.State, b.State) }):
		return fmt.Errorf("states %+v, model %+v", got.KeyStates, want.KeyStates)
	case got.Held != want.Held || got.Capacity != want.Capacity:
		return fmt.Errorf("Usage() = %d of %d, model %d of %d", got.Held, got.Capacity, want.Held, want.Capacity)
	case got.Objects != want.Objects || got.WriteLocked != want.WriteLocked || got.TempReadLocked != want.TempReadLocked:
		return fmt.Errorf("Stats: %d objects, %d write-locked, %d temporary read-locked; model %d, %d, %d",
			got.Objects, got.WriteLocked, got.TempReadLocked, want.Objects, want.WriteLocked, want.TempReadLocked)
	case got.Quarantined != want.Quarantined || got.QuarantinedBytes != want.QuarantinedBytes:
		return fmt.Errorf("Stats: %d blocks quarantined in %d bytes, model %d in %d", got.Quarantined, got.QuarantinedBytes, want.Quarantined, want.QuarantinedBytes)
	case got.Counters != want.Counters:
		return fmt.Errorf("Stats counters %+v, model %+v", got.Counters, want.Counters)
	case !slices.EqualFunc(got.States, want.States, sameEntry):
		for i := range min(len(got.States), len(want.States)) {
			if !sameEntry(got.States[i], want.States[i]) {
				return fmt.Errorf("object #%d in LRU order: %+v, model %+v", i, got.States[i], want.States[i])
			}
		}
		return fmt.Errorf("%d objects, model %d", len(got.States), len(want.States))
	case !slices.Equal(got.Extents, want.Extents):
		return fmt.Errorf("free extents %v, model %v", got.Extents, want.Extents)
	}
	return nil
}

// sameEntry is sameState of two objects with their keys.
func sameEntry(a, b l1.Entry[Key]) bool {
	return a.Key == b.Key && sameState(a.ObjectState, b.ObjectState)
}
