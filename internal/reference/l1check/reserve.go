package l1check

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

// Observation records one ReserveWrite call: the request, what the system
// looked like just before, the answer, and what it looked like after.
type Observation struct {
	Setup Setup
	Keys  []Key
	// Positions are ReserveWriteChain's; nil for ReserveWrite.
	Positions []uint32
	Size      int64
	Temporary []bool
	Mode      l1.Mode

	// Before and After are every object's state, by key. Before is read
	// from the manager itself when the observation peeked, and from the
	// model otherwise (so that the call reclaims expired objects itself).
	Before, After map[Key]l1.ObjectState
	// ExtentsBefore and ExtentsAfter are the allocator's free extents.
	ExtentsBefore, ExtentsAfter []allocator.Block
	// Need holds the indices of the keys that need memory: first
	// occurrences of keys missing before the call, unless Mode is
	// ModeUpdate.
	Need []int
	// Fit is how many of len(Need) objects of Size fit before the call:
	// Σ⌊extent/size⌋ (the allocator's Fit), or ⌊largest extent/size⌋
	// under Contiguous placement, capped at len(Need).
	Fit int

	Results []l1.Result
	Err     error
	// Reserved holds the keys of every EventWriteReserved the call
	// delivered, in order, or nil when there was none.
	Reserved [][]Key
	// Evicted holds the keys the call evicted, in eviction order.
	Evicted []Key
	// Used and LiveBlocks are the allocator's after the call.
	Used, LiveBlocks int64
	// Quarantined and QuarantinedBytes are the manager's quarantine after
	// the call (Stats).
	Quarantined      int
	QuarantinedBytes int64
	// Verify is the allocator's invariant check after the call.
	Verify error
}

// String summarizes the request and what the memory held before it.
func (o *Observation) String() string {
	return fmt.Sprintf("ReserveWrite(%d keys, size %d, mode %v) on %v: need %d, fit %d", len(o.Keys), o.Size, o.Mode, o.Setup, len(o.Need), o.Fit)
}

// Granted returns how many needing keys got OK.
func (o *Observation) Granted() int {
	k := 0
	for _, i := range o.Need {
		if o.Results != nil && o.Results[i].Status == l1.OK {
			k++
		}
	}
	return k
}

func (s *System) states() map[Key]l1.ObjectState {
	out := map[Key]l1.ObjectState{}
	for _, e := range s.M.Snapshot() {
		out[e.Key] = e.ObjectState
	}
	return out
}

// modelStates is the model's states, after a sweep, by key.
func (s *System) modelStates() map[Key]l1.ObjectState {
	out := map[Key]l1.ObjectState{}
	for _, e := range s.Model.Snapshot() {
		out[e.Key] = e.ObjectState
	}
	return out
}

// ObserveReserve calls ReserveWrite on the manager (not on the model) and
// records the call. With peek, the state before is read from the manager,
// which reclaims expired objects first; without, it is read from the model,
// which must be in step.
func (s *System) ObserveReserve(keys []Key, temporary []bool, size int64, mode l1.Mode, peek bool) *Observation {
	return s.ObserveReserveChain(keys, nil, temporary, size, mode, peek)
}

// ObserveReserveChain is ObserveReserve for ReserveWriteChain with
// positions (nil: a plain ReserveWrite).
func (s *System) ObserveReserveChain(keys []Key, positions []uint32, temporary []bool, size int64, mode l1.Mode, peek bool) *Observation {
	o := &Observation{Setup: s.Setup, Keys: keys, Positions: positions, Size: size, Temporary: temporary, Mode: mode}
	if peek {
		o.Before, o.ExtentsBefore = s.states(), s.A.FreeExtents()
	} else {
		o.Before = s.modelStates()
		o.ExtentsBefore = runsOf(s.Model.Mem)
	}
	seen := map[Key]bool{}
	for i, k := range keys {
		if _, ok := o.Before[k]; !ok && !seen[k] && mode != l1.ModeUpdate {
			o.Need = append(o.Need, i)
		}
		seen[k] = true
	}
	o.Fit = fitOf(o.ExtentsBefore, size, len(o.Need), s.Setup)
	s.takeEvents()
	if positions != nil {
		o.Results, o.Err = s.M.ReserveWriteChain(keys, positions, temporary, size, mode)
	} else {
		o.Results, o.Err = s.M.ReserveWrite(keys, temporary, size, mode)
	}
	for _, e := range s.takeEvents() {
		switch {
		case e.Kind == l1.EventWriteReserved:
			o.Reserved = append(o.Reserved, e.Keys)
		case e.Kind == l1.EventRemoved && e.Cause == l1.CauseEvicted:
			o.Evicted = append(o.Evicted, e.Keys...)
		}
	}
	o.After, o.ExtentsAfter = s.states(), s.A.FreeExtents()
	// Reading the states reclaimed expired objects (a rejected call does
	// not), so the model must do the same.
	s.Model.Sweep()
	st := s.A.Stats()
	o.Used, o.LiveBlocks, o.Verify = st.Used, st.LiveBlocks, s.A.Verify()
	ms := s.M.Stats()
	o.Quarantined, o.QuarantinedBytes = ms.QuarantinedObjects, ms.QuarantinedBytes
	return o
}

// runsOf lists the model memory's free runs as blocks.
func runsOf(r *allocref.Alloc) []allocator.Block {
	out := []allocator.Block{}
	for _, x := range r.Runs() {
		out = append(out, allocator.Block{Offset: x[0] * r.Align, Size: x[1] * r.Align})
	}
	return out
}

// fitOf is the largest k ≤ n objects of size that the free extents hold:
// Σ⌊extent/size⌋, or the largest extent's share under Contiguous.
func fitOf(extents []allocator.Block, size int64, n int, s Setup) int {
	if size <= 0 || size > int64(s.Units)*s.Align || n == 0 {
		return 0
	}
	aligned := (size + s.Align - 1) / s.Align * s.Align
	var sum, most int64
	for _, e := range extents {
		sum += e.Size / aligned
		most = max(most, e.Size/aligned)
	}
	if s.Placement == allocator.Contiguous {
		return int(min(int64(n), most))
	}
	return int(min(int64(n), sum))
}

// CheckReserve checks every ReserveWrite contract on o, naming the first
// one broken.
func CheckReserve(o *Observation) error {
	if o.Err != nil {
		return CheckRejected(o)
	}
	for _, c := range []struct {
		name  string
		check func(*Observation) error
	}{
		{"request-order locking", CheckRequestOrder},
		{"prefix maximality", CheckPrefixMaximal},
		{"tail OOM statuses", CheckTailOOM},
		{"no leak", CheckNoLeak},
		{"no extra victim", CheckNoExtraVictim},
	} {
		if err := c.check(o); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

// CheckRejected checks a ReserveWrite that returned an error: it must wrap
// l1.ErrInvalidArgument or l1.ErrClosed, and nothing may have changed.
func CheckRejected(o *Observation) error {
	if o.Err == nil {
		return nil
	}
	if !errors.Is(o.Err, l1.ErrInvalidArgument) && !errors.Is(o.Err, l1.ErrClosed) {
		return fmt.Errorf("rejected call: unexpected error %v", o.Err)
	}
	if err := sameStates(o.Before, o.After, nil); err != nil {
		return fmt.Errorf("rejected call changed state: %w", err)
	}
	if !slices.Equal(o.ExtentsBefore, o.ExtentsAfter) {
		return fmt.Errorf("rejected call changed the free extents from %v to %v", o.ExtentsBefore, o.ExtentsAfter)
	}
	if len(o.Reserved) > 0 {
		return fmt.Errorf("rejected call reported reserved keys %v", o.Reserved)
	}
	return nil
}

// CheckPrefixMaximal: the number k of needing keys granted is the maximum
// the memory held before the call: all of them if they fit, else Fit,
// except that a one-key batch, an object larger than the memory and the
// all-or-nothing baseline (baseline.None) are all or nothing. With on-demand eviction k may only be
// larger.
func CheckPrefixMaximal(o *Observation) error {
	if o.Err != nil {
		return nil
	}
	n, k := len(o.Need), o.Granted()
	want := o.Fit
	if o.Fit < n && (n == 1 || o.Setup.Prefix == baseline.None) {
		want = 0
	}
	switch {
	case o.Setup.Prefix == baseline.None && k != 0 && k != n:
		return fmt.Errorf("all or nothing granted %d of %d needing keys; want all or none", k, n)
	case o.Setup.EvictOnDemand && k < want:
		return fmt.Errorf("granted %d of %d needing keys; at least %d fit before evicting", k, n, want)
	case !o.Setup.EvictOnDemand && k != want:
		return fmt.Errorf("granted %d of %d needing keys; the memory holds %d (size %d, %v)", k, n, want, o.Size, o.Setup.Placement)
	}
	return nil
}

// CheckRequestOrder: the granted needing keys are exactly the first k, in
// request order; every granted key, new or re-locked, is now write-locked
// with its own block (new keys get distinct blocks that overlap nothing,
// re-locked keys keep theirs); no other key changed state (on-demand
// eviction may remove evictable keys outside the request); and listeners
// got one EventWriteReserved with exactly the granted keys in request order.
func CheckRequestOrder(o *Observation) error {
	if o.Err != nil {
		return nil
	}
	k := o.Granted()
	for j, i := range o.Need {
		if ok := o.Results[i].Status == l1.OK; ok != (j < k) {
			return fmt.Errorf("needing key #%d (key %d, %d of %d needing): status %v, but %d were granted: not the first k in request order",
				i, o.Keys[i], j, len(o.Need), o.Results[i].Status, k)
		}
	}
	var granted []Key
	changed := map[Key]bool{}
	for i, r := range o.Results {
		key := o.Keys[i]
		if r.Status != l1.OK {
			continue
		}
		granted = append(granted, key)
		changed[key] = true
		after, ok := o.After[key]
		switch {
		case !ok:
			return fmt.Errorf("granted key %d has no object", key)
		case !after.WriteLocked:
			return fmt.Errorf("granted key %d is not write-locked: %+v", key, after)
		case after.Block != r.Block:
			return fmt.Errorf("granted key %d: result block %+v, object block %+v", key, r.Block, after.Block)
		case r.Block.Size < o.Size:
			return fmt.Errorf("granted key %d: block %+v smaller than %d", key, r.Block, o.Size)
		}
		if before, existed := o.Before[key]; existed && allocref.WithoutGen(before.Block) != allocref.WithoutGen(after.Block) {
			return fmt.Errorf("re-locked key %d moved from %+v to %+v", key, before.Block, after.Block)
		}
	}
	if err := disjoint(o.After); err != nil {
		return err
	}
	evicted := func(k Key, before l1.ObjectState) bool {
		return o.Setup.EvictOnDemand && before.Evictable && !containsKey(o.Keys, k)
	}
	if err := sameStates(o.Before, o.After, func(k Key, before l1.ObjectState, present bool) bool {
		return changed[k] || !present && evicted(k, before)
	}); err != nil {
		return err
	}
	var wantEvents [][]Key
	if len(granted) > 0 {
		wantEvents = [][]Key{granted}
	}
	if !slices.EqualFunc(o.Reserved, wantEvents, slices.Equal) {
		return fmt.Errorf("listeners got write-reserved %v, want %v", o.Reserved, wantEvents)
	}
	return nil
}

// CheckTailOOM: every needing key after the granted prefix gets
// OutOfMemory, a zero block and no object; no other key gets OutOfMemory.
func CheckTailOOM(o *Observation) error {
	if o.Err != nil {
		return nil
	}
	k := o.Granted()
	tail := map[int]bool{}
	for _, i := range o.Need[k:] {
		tail[i] = true
		r := o.Results[i]
		if r.Status != l1.OutOfMemory || r.Block != (allocator.Block{}) {
			return fmt.Errorf("tail key #%d (key %d) got %v %+v, want OUT_OF_MEMORY and no block", i, o.Keys[i], r.Status, r.Block)
		}
		if st, ok := o.After[o.Keys[i]]; ok {
			return fmt.Errorf("tail key %d holds an object %+v", o.Keys[i], st)
		}
	}
	for i, r := range o.Results {
		if r.Status == l1.OutOfMemory && !tail[i] {
			return fmt.Errorf("key #%d (key %d) needed no memory but got OUT_OF_MEMORY", i, o.Keys[i])
		}
	}
	return nil
}

// CheckNoExtraVictim: on-demand eviction that made room for the whole
// batch stopped at the first victim that did. With every victim but the
// last freed, the free extents held fewer than the needing keys (Fit, or
// the largest extent under Contiguous): the plain loop "free the next
// victim, then ask Fit" would have gone on, whatever sizes share the pool.
func CheckNoExtraVictim(o *Observation) error {
	n := len(o.Need)
	if o.Err != nil || len(o.Evicted) == 0 || o.Granted() < n {
		return nil
	}
	free := slices.Clone(o.ExtentsBefore)
	for _, k := range o.Evicted[:len(o.Evicted)-1] {
		st, ok := o.Before[k]
		if !ok {
			return fmt.Errorf("evicted key %d, which did not exist", k)
		}
		free = append(free, allocref.WithoutGen(st.Block))
	}
	if fit := fitOf(mergeExtents(free), o.Size, n, o.Setup); fit >= n {
		return fmt.Errorf("evicted %v; all but the last already made room for the %d needing keys (size %d, %v)",
			o.Evicted, n, o.Size, o.Setup.Placement)
	}
	return nil
}

// mergeExtents sorts free blocks by offset and merges those that touch.
func mergeExtents(bs []allocator.Block) []allocator.Block {
	slices.SortFunc(bs, func(x, y allocator.Block) int { return cmp.Compare(x.Offset, y.Offset) })
	var out []allocator.Block
	for _, b := range bs {
		if last := len(out) - 1; last >= 0 && out[last].End() == b.Offset {
			out[last].Size += b.Size
			continue
		}
		out = append(out, b)
	}
	return out
}

// CheckNoLeak: the allocator's used bytes and live blocks are exactly the
// blocks of the manager's objects and of its quarantine, and its
// invariants hold.
func CheckNoLeak(o *Observation) error {
	if o.Verify != nil {
		return fmt.Errorf("allocator: %w", o.Verify)
	}
	var used int64
	for _, st := range o.After {
		used += st.Block.Size
	}
	if o.Used != used+o.QuarantinedBytes || o.LiveBlocks != int64(len(o.After)+o.Quarantined) {
		return fmt.Errorf("allocator holds %d bytes in %d blocks; the manager's %d objects hold %d bytes and its quarantine %d in %d blocks",
			o.Used, o.LiveBlocks, len(o.After), used, o.QuarantinedBytes, o.Quarantined)
	}
	return nil
}

// disjoint checks that no two objects' blocks overlap.
func disjoint(states map[Key]l1.ObjectState) error {
	type kb struct {
		k Key
		b allocator.Block
	}
	var bs []kb
	for k, st := range states {
		bs = append(bs, kb{k, st.Block})
	}
	slices.SortFunc(bs, func(x, y kb) int { return cmp.Compare(x.b.Offset, y.b.Offset) })
	for i := 1; i < len(bs); i++ {
		if bs[i].b.Offset < bs[i-1].b.End() {
			return fmt.Errorf("keys %d and %d share memory: %+v and %+v", bs[i-1].k, bs[i].k, bs[i-1].b, bs[i].b)
		}
	}
	return nil
}

// sameStates checks that every key has the same state before and after,
// except the keys skip allows (present says whether the key still exists).
func sameStates(before, after map[Key]l1.ObjectState, skip func(k Key, before l1.ObjectState, present bool) bool) error {
	for k, b := range before {
		a, ok := after[k]
		if skip != nil && skip(k, b, ok) {
			continue
		}
		if !ok {
			return fmt.Errorf("key %d disappeared (was %+v)", k, b)
		}
		if !sameState(a, b) {
			return fmt.Errorf("key %d changed from %+v to %+v", k, b, a)
		}
	}
	for k, a := range after {
		if _, ok := before[k]; !ok && (skip == nil || !skip(k, l1.ObjectState{}, true)) {
			return fmt.Errorf("key %d appeared: %+v", k, a)
		}
	}
	return nil
}
