// Package l1check runs the L1 manager side by side with the slow model of
// package l1ref and states the manager's contracts as check functions,
// so that the fuzz targets (package fuzz) and the property tests (package
// proptest) share one definition of each contract.
//
// A System is one manager over a real allocator, a manual clock and the
// model. Apply runs one Op on both and compares everything observable:
// per-key results, errors, usage, counters, the per-key states in LRU
// order, and the allocator's free extents. ObserveReserve records what a
// ReserveWrite changed, and the Check* functions state the ReserveWrite
// contracts on that record using only the real system's own observations,
// not the model: prefix maximality, request-order locking, tail OOM
// statuses, no leak, no extra victim of on-demand eviction, and rejected
// calls changing nothing.
//
// Every part of a System can be replaced through a Variant, which is how
// the tests substitute the broken implementations of package mutant and
// prove that each check fails on them.
package l1check

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1ref"
	"github.com/kvalloc/kvalloc/l1"
)

// Key is the key type of every System.
type Key = int

// Manager is every method of *l1.Manager[Key] the checks call. Broken
// variants wrap a real manager and override some of them.
type Manager interface {
	ReserveWrite(keys []Key, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error)
	ReserveWriteChain(keys []Key, positions []uint32, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error)
	FinishWrite(keys []Key, leases []l1.Lease) ([]l1.Status, error)
	FinishWriteAndReserveRead(keys []Key, leases []l1.Lease, locks int) ([]l1.Result, error)
	AbortWrite(keys []Key, leases []l1.Lease) ([]l1.Status, error)
	ReserveRead(keys []Key, locks int) ([]l1.Result, error)
	ReserveReadPrefix(keys []Key, locks int) ([]l1.Result, int, error)
	UnsafeRead(keys []Key) ([]l1.Result, error)
	FinishRead(keys []Key, leases []l1.Lease, locks int) ([]l1.Status, error)
	Delete(keys []Key, force bool) ([]l1.Status, error)
	Clear(force bool) int
	Touch(keys []Key) error
	EvictTo(ratio float64) (int, error)
	IsEvictable(key Key) bool
	State(key Key) (l1.ObjectState, bool)
	Snapshot() []l1.Entry[Key]
	Stats() l1.Stats
	Usage() (used, capacity int64)
	Len() int
	Close() error
	AddListenerFunc(f func(l1.Event[Key]))
}

// Setup describes a System: a heap-backed allocator of Units units of
// Align bytes and the manager's configuration.
type Setup struct {
	Units     int
	Align     int64
	Placement allocator.Placement
	// Prefix is how the largest prefix is found: over the allocator
	// itself (onepass), or through one of LMCache's baselines.
	Prefix        baseline.Strategy
	EvictOnDemand bool
	// Eviction is the eviction policy, on demand and in EvictTo.
	Eviction l1.EvictionPolicy
	// WriteTTL and ReadTTL; 0 means l1's defaults.
	WriteTTL, ReadTTL time.Duration
	// Quarantine is l1.Config.QuarantineLapsedWrites.
	Quarantine bool
}

// String describes the setup in one line.
func (s Setup) String() string {
	return fmt.Sprintf("{%d×%dB %v prefix=%v evict=%v policy=%v wttl=%v rttl=%v quarantine=%v}", s.Units, s.Align, s.Placement, s.Prefix, s.EvictOnDemand, s.Eviction, s.WriteTTL, s.ReadTTL, s.Quarantine)
}

// Variant replaces parts of a System. The zero Variant is the real thing.
type Variant struct {
	// Memory wraps the allocator before the manager sees it.
	Memory func(*allocator.Allocator) l1.Memory
	// Config edits the manager's configuration behind the model's back.
	Config func(*l1.Config)
	// Strategy edits the prefix strategy behind the model's back.
	Strategy func(baseline.Strategy) baseline.Strategy
	// Manager wraps the manager; a is the allocator under it.
	Manager func(m *l1.Manager[Key], a *allocator.Allocator) Manager
	// Front replaces the manager and its allocator with another front end
	// to a manager of the same configuration (m.Config(), its clock
	// included) over an allocator of a's capacity and alignment: a daemon
	// serving one over a socket (daemoncheck.Front). The checks then call
	// and observe that front end; closeFront releases it. A daemon runs
	// l1's one pass alone, so New runs the Setup with Prefix OnePass.
	Front func(m *l1.Manager[Key], a *allocator.Allocator) (front Manager, alloc *allocator.Allocator, closeFront func(), err error)
}

// Epoch is the time of the manual clock when a System starts.
var Epoch = time.Unix(1_700_000_000, 0)

// System is one manager under test, its allocator, its clock and the model.
// Several actors share it: each keeps the leases its own calls got (Book),
// so an actor whose lock lapsed presents a stale lease, as a late writer or
// reader would.
type System struct {
	Setup Setup
	M     Manager
	A     *allocator.Allocator
	Model *l1ref.Manager[Key]
	Book  *Book

	mu     sync.Mutex
	now    time.Duration
	events []l1.Event[Key]

	closeFront func()               // a Variant's front end, or nil
	own        *allocator.Allocator // the allocator New made, when a front end replaced it
}

// New builds a System. It fails only on a bad Setup.
func New(s Setup, v Variant) (*System, error) {
	if v.Front != nil {
		s.Prefix = baseline.OnePass
	}
	if s.Align == 0 {
		s.Align = 64
	}
	if s.WriteTTL == 0 {
		s.WriteTTL = l1.DefaultWriteTTL
	}
	if s.ReadTTL == 0 {
		s.ReadTTL = l1.DefaultReadTTL
	}
	r, err := hostmem.NewHeapRegion(int64(s.Units) * s.Align)
	if err != nil {
		return nil, err
	}
	a, err := allocator.New(r, allocator.Options{Align: s.Align})
	if err != nil {
		return nil, err
	}
	sys := &System{Setup: s, A: a, Book: NewBook()}
	var mem l1.Memory = a
	if v.Memory != nil {
		mem = v.Memory(a)
	}
	strategy := s.Prefix
	if v.Strategy != nil {
		strategy = v.Strategy(strategy)
	}
	mem = strategy.Wrap(mem, s.EvictOnDemand)
	cfg := l1.Config{
		Placement: s.Placement, EvictOnDemand: s.EvictOnDemand, Eviction: s.Eviction,
		WriteTTL: s.WriteTTL, ReadTTL: s.ReadTTL, QuarantineLapsedWrites: s.Quarantine, Now: sys.clock,
	}
	model := l1ref.Config{Config: cfg, AllOrNothing: s.Prefix == baseline.None, Epoch: Epoch}
	if v.Config != nil {
		v.Config(&cfg)
	}
	m, err := l1.New[Key](mem, cfg)
	if err != nil {
		a.Close()
		return nil, err
	}
	sys.M = m
	if v.Manager != nil {
		sys.M = v.Manager(m, a)
	}
	if v.Front != nil {
		f, fa, closeFront, err := v.Front(m, a)
		if err != nil {
			a.Close()
			return nil, err
		}
		sys.M, sys.A, sys.closeFront, sys.own = f, fa, closeFront, a
	}
	sys.M.AddListenerFunc(scribble)
	sys.M.AddListenerFunc(sys.listen)
	sys.Model = l1ref.New[Key](allocref.NewAlloc(int64(s.Units)*s.Align, s.Align), model)
	return sys, nil
}

// MustNew is New for setups known to be good; it panics otherwise.
func MustNew(s Setup, v Variant) *System {
	sys, err := New(s, v)
	if err != nil {
		panic(err)
	}
	return sys
}

// Close releases the allocator.
func (s *System) Close() {
	if s.closeFront != nil {
		s.closeFront()
		s.own.Close()
		return
	}
	s.A.Close()
}

func (s *System) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Epoch.Add(s.now)
}

// Advance moves the clock of the manager and of the model, either way,
// saturating at the int64 range of nanoseconds.
func (s *System) Advance(d time.Duration) {
	s.mu.Lock()
	s.now = l1ref.AddClock(s.now, d)
	s.mu.Unlock()
	s.Model.Advance(d)
}

// scribble is the first listener of every System: it overwrites the keys
// of every event it gets, as a listener that owns its slice may. The
// recording listener after it must still see the keys the operation
// changed, so a manager that hands every listener one slice fails.
func scribble(e l1.Event[Key]) {
	for i := range e.Keys {
		e.Keys[i] = -1 - e.Keys[i]
	}
}

func (s *System) listen(e l1.Event[Key]) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// takeEvents returns the events delivered since the last call.
func (s *System) takeEvents() []l1.Event[Key] {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.events
	s.events = nil
	return ev
}

// OpKind names a Manager call, or a clock advance.
type OpKind uint8

// The operations a System applies.
const (
	OpReserveWrite OpKind = iota
	OpFinishWrite
	OpFinishWriteAndReserveRead
	OpAbortWrite
	OpReserveRead
	OpUnsafeRead
	OpFinishRead
	OpDelete
	OpClear
	OpTouch
	OpEvictTo
	OpIsEvictable // IsEvictable and State of each key
	OpLen
	OpAdvance
	OpClose
	NumOpKinds
)

var opNames = [...]string{"ReserveWrite", "FinishWrite", "FinishWriteAndReserveRead", "AbortWrite", "ReserveRead",
	"UnsafeRead", "FinishRead", "Delete", "Clear", "Touch", "EvictTo", "IsEvictable", "Len", "Advance", "Close"}

// String returns the method name.
func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}

// LeaseMode says which leases a finishing call presents.
type LeaseMode uint8

const (
	// LeaseOwn presents the actor's own lease of each key (0 where it has
	// none): what an honest, possibly late, holder presents.
	LeaseOwn LeaseMode = iota
	// LeaseZero presents 0 for every key: never valid.
	LeaseZero
	// LeaseShort presents one lease fewer than keys: rejected.
	LeaseShort
)

// Actors is the number of actors an Op may name.
const Actors = 4

// Op is one call. Each kind reads only its own fields.
type Op struct {
	Kind OpKind
	// Actor makes the call (0 to Actors-1): its leases are presented and
	// the leases the call hands out are its own.
	Actor     int
	Lease     LeaseMode // FinishWrite, FinishWriteAndReserveRead, AbortWrite, FinishRead
	Keys      []Key
	Size      int64   // ReserveWrite
	Temporary []bool  // ReserveWrite
	Mode      l1.Mode // ReserveWrite
	// Prefix makes a ReserveRead a ReserveReadPrefix.
	Prefix bool
	// Positions, when not nil, makes the ReserveWrite a ReserveWriteChain
	// with these chain positions (l1.Partial bits included).
	Positions []uint32
	Locks     int           // read-lock counts
	Force     bool          // Delete, Clear
	Ratio     float64       // EvictTo
	Advance   time.Duration // Advance
	// Observe makes Apply compare the full per-key state after the call.
	// Reading it reclaims expired objects, so leaving it off lets the next
	// call do that itself.
	Observe bool
}

// String renders the call, abbreviating long key lists.
func (o Op) String() string {
	keys := fmt.Sprint(o.Keys)
	if len(o.Keys) > 12 {
		keys = fmt.Sprintf("[%d keys: %v…]", len(o.Keys), o.Keys[:12])
	}
	if o.Actor != 0 || o.Lease != LeaseOwn {
		keys = fmt.Sprintf("%s actor=%d lease=%d", keys, o.Actor, o.Lease)
	}
	switch o.Kind {
	case OpReserveWrite:
		if o.Positions != nil {
			return fmt.Sprintf("ReserveWriteChain(%s, pos=%v, %d, temp=%v, %v)", keys, o.Positions, o.Size, o.Temporary, o.Mode)
		}
		return fmt.Sprintf("ReserveWrite(%s, %d, temp=%v, %v)", keys, o.Size, o.Temporary, o.Mode)
	case OpFinishWriteAndReserveRead, OpReserveRead, OpFinishRead:
		if o.Kind == OpReserveRead && o.Prefix {
			return fmt.Sprintf("ReserveReadPrefix(%s, %d)", keys, o.Locks)
		}
		return fmt.Sprintf("%v(%s, %d)", o.Kind, keys, o.Locks)
	case OpDelete:
		return fmt.Sprintf("Delete(%s, force=%v)", keys, o.Force)
	case OpClear:
		return fmt.Sprintf("Clear(force=%v)", o.Force)
	case OpEvictTo:
		return fmt.Sprintf("EvictTo(%v)", o.Ratio)
	case OpAdvance:
		return fmt.Sprintf("Advance(%v)", o.Advance)
	case OpLen, OpClose:
		return o.Kind.String() + "()"
	}
	return fmt.Sprintf("%v(%s)", o.Kind, keys)
}

// checkErr compares an error of the manager with the model's, which wraps
// l1.ErrInvalidArgument or l1.ErrClosed.
func checkErr(got, want error) error {
	switch {
	case want == nil && got != nil:
		return fmt.Errorf("unexpected error %v", got)
	case errors.Is(want, l1.ErrInvalidArgument) && !errors.Is(got, l1.ErrInvalidArgument):
		return fmt.Errorf("error %v, want one wrapping l1.ErrInvalidArgument", got)
	case errors.Is(want, l1.ErrClosed) && !errors.Is(got, l1.ErrClosed):
		return fmt.Errorf("error %v, want one wrapping l1.ErrClosed", got)
	}
	return nil
}

func compareStatuses(got, want []l1.Status) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d statuses for %d keys", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("key #%d: status %v, model %v (all: %v, model %v)", i, got[i], want[i], got, want)
		}
	}
	return nil
}

// compareResults compares the manager's results with the model's, whose
// blocks carry no generation.
func compareResults(got, want []l1.Result) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d results for %d keys", len(got), len(want))
	}
	for i := range got {
		if g := withoutGen(got[i]); g != want[i] {
			return fmt.Errorf("key #%d: status %v %+v lease %d, model %v %+v lease %d", i, g.Status, g.Block, g.Lease, want[i].Status, want[i].Block, want[i].Lease)
		}
	}
	return nil
}

// withoutGen is r with its block's generation cleared, as the model's.
func withoutGen(r l1.Result) l1.Result { r.Block = allocref.WithoutGen(r.Block); return r }

// Apply runs op on the manager and the model and returns the first
// difference, or a broken ReserveWrite contract. After the call it compares
// Usage and Stats (which do not reclaim expired objects), then, if
// op.Observe, every object's state in LRU order, and always the allocator
// against the model's memory.
func (s *System) Apply(op Op) error {
	if err := s.apply(op); err != nil {
		return fmt.Errorf("%v: %w", op, err)
	}
	if err := s.AfterApply(op.Observe); err != nil {
		return fmt.Errorf("after %v: %w", op, err)
	}
	return nil
}

func (s *System) apply(op Op) error {
	md := s.Model
	leases := s.Book.Leases(op)
	switch op.Kind {
	case OpReserveWrite:
		o := s.ObserveReserveChain(op.Keys, op.Positions, op.Temporary, op.Size, op.Mode, op.Observe)
		s.Book.Record(op, o.Results, o.Err)
		return s.CheckReserveWithModel(o)
	case OpFinishWrite:
		got, err := s.M.FinishWrite(op.Keys, leases)
		want, wantErr := md.FinishWrite(op.Keys, leases)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		return compareStatuses(got, want)
	case OpFinishWriteAndReserveRead:
		got, err := s.M.FinishWriteAndReserveRead(op.Keys, leases, op.Locks)
		s.Book.Record(op, got, err)
		want, wantErr := md.FinishWriteAndReserveRead(op.Keys, leases, op.Locks)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		return compareResults(got, want)
	case OpAbortWrite:
		got, err := s.M.AbortWrite(op.Keys, leases)
		want, wantErr := md.AbortWrite(op.Keys, leases)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		return compareStatuses(got, want)
	case OpReserveRead:
		if op.Prefix {
			got, n, err := s.M.ReserveReadPrefix(op.Keys, op.Locks)
			s.Book.Record(op, got, err)
			want, wantN, wantErr := md.ReserveReadPrefix(op.Keys, op.Locks)
			if err := checkErr(err, wantErr); err != nil || wantErr != nil {
				return err
			}
			if n != wantN {
				return fmt.Errorf("locked a prefix of %d keys, model %d", n, wantN)
			}
			return compareResults(got, want)
		}
		got, err := s.M.ReserveRead(op.Keys, op.Locks)
		s.Book.Record(op, got, err)
		want, wantErr := md.ReserveRead(op.Keys, op.Locks)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		return compareResults(got, want)
	case OpUnsafeRead:
		got, err := s.M.UnsafeRead(op.Keys)
		want, wantErr := md.UnsafeRead(op.Keys)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		return compareResults(got, want)
	case OpFinishRead:
		got, err := s.M.FinishRead(op.Keys, leases, op.Locks)
		want, wantErr := md.FinishRead(op.Keys, leases, op.Locks)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		return compareStatuses(got, want)
	case OpDelete:
		got, err := s.M.Delete(op.Keys, op.Force)
		want, wantErr := md.Delete(op.Keys, op.Force)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		return compareStatuses(got, want)
	case OpClear:
		if got, want := s.M.Clear(op.Force), md.Clear(op.Force); got != want {
			return fmt.Errorf("cleared %d, model %d", got, want)
		}
	case OpTouch:
		if err := checkErr(s.M.Touch(op.Keys), md.Touch(op.Keys)); err != nil {
			return err
		}
	case OpEvictTo:
		got, err := s.M.EvictTo(op.Ratio)
		want, wantErr := md.EvictTo(op.Ratio)
		if err := checkErr(err, wantErr); err != nil || wantErr != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("evicted %d, model %d", got, want)
		}
	case OpIsEvictable:
		for _, k := range op.Keys {
			if got, want := s.M.IsEvictable(k), md.IsEvictable(k); got != want {
				return fmt.Errorf("IsEvictable(%d) = %v, model %v", k, got, want)
			}
			got, ok := s.M.State(k)
			want, wok := md.State(k)
			if ok != wok || !sameState(got, want) {
				return fmt.Errorf("State(%d) = %+v, %v; model %+v, %v", k, got, ok, want, wok)
			}
		}
	case OpLen:
		md.Sweep()
		if got, want := s.M.Len(), md.Len(); got != want {
			return fmt.Errorf("Len() = %d, model %d", got, want)
		}
	case OpAdvance:
		s.Advance(op.Advance)
	case OpClose:
		if err := s.M.Close(); err != nil {
			return fmt.Errorf("Close: %v", err)
		}
		md.Close()
	default:
		return fmt.Errorf("unknown op kind %d", op.Kind)
	}
	return nil
}

// CheckReserveWithModel applies the ReserveWrite that o observed to the
// model and checks every ReserveWrite contract on o, then compares the
// answers with the model's. The contracts come first so that a failure
// names the contract when one broke.
func (s *System) CheckReserveWithModel(o *Observation) error {
	want, wantErr := s.Model.ReserveWriteChain(o.Keys, o.Positions, o.Temporary, o.Size, o.Mode)
	if err := checkErr(o.Err, wantErr); err != nil {
		return err
	}
	if err := s.checkQuarantineKept(o); err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	if err := CheckReserve(o); err != nil {
		return err
	}
	if wantErr == nil {
		if err := compareResults(o.Results, want); err != nil {
			return fmt.Errorf("model: %w", err)
		}
	}
	return nil
}

// checkQuarantineKept checks the quarantine's contract on a ReserveWrite:
// no block under a live lease is reissued. No key is granted memory of a
// block that a lapsed writer, or a holder of a live lock on a key deleted
// with force, still holds (the model's quarantine after the call, which
// the call's own lapses joined before it allocated, and from which the
// holds that lapsed by then left).
func (s *System) checkQuarantineKept(o *Observation) error {
	q := s.Model.QuarantinedWrites()
	if len(q) == 0 || o.Err != nil {
		return nil
	}
	for i, r := range o.Results {
		if r.Status != l1.OK {
			continue
		}
		for l, w := range q {
			if r.Block.Offset < w.Block.End() && w.Block.Offset < r.Block.End() {
				return fmt.Errorf("key %d got %+v, memory of the block %+v that %s of key %d (lease %d) still holds",
					o.Keys[i], r.Block, w.Block, heldBy(w), w.Key, l)
			}
		}
	}
	return nil
}

// AfterApply runs the comparisons Apply makes after a call: Usage, Stats
// and the allocator, then, if observe, every object's state.
func (s *System) AfterApply(observe bool) error {
	if err := s.compareQuiet(); err != nil {
		return err
	}
	if observe {
		return s.CompareState()
	}
	return nil
}

// compareQuiet compares what can be read without reclaiming expired
// objects: Usage, Stats and the allocator.
func (s *System) compareQuiet() error {
	md := s.Model
	used, capacity := s.M.Usage()
	if used != md.Used() || capacity != md.Mem.Capacity() {
		return fmt.Errorf("Usage() = %d of %d, model %d of %d", used, capacity, md.Used(), md.Mem.Capacity())
	}
	st := s.M.Stats()
	qn, qb := md.Quarantine()
	switch {
	case st.Used != st.Held+st.QuarantinedBytes:
		return fmt.Errorf("Stats: memory used %d, but the objects hold %d and the quarantine %d", st.Used, st.Held, st.QuarantinedBytes)
	case st.QuarantinedObjects != qn || st.QuarantinedBytes != qb:
		return fmt.Errorf("Stats: %d blocks quarantined in %d bytes, model %d in %d", st.QuarantinedObjects, st.QuarantinedBytes, qn, qb)
	case st.Objects != md.Len() || st.WriteLocked != md.WriteLocked() || st.TemporaryReadLocked != md.TemporaryReadLocked():
		return fmt.Errorf("Stats: %d objects, %d write-locked, %d temporary read-locked; model %d, %d, %d",
			st.Objects, st.WriteLocked, st.TemporaryReadLocked, md.Len(), md.WriteLocked(), md.TemporaryReadLocked())
	case st.Held != md.Used() || st.Used != md.Mem.Capacity()-md.Mem.FreeBytes():
		return fmt.Errorf("Stats: held %d, memory used %d; model %d, %d", st.Held, st.Used, md.Used(), md.Mem.Capacity()-md.Mem.FreeBytes())
	case l1ref.Counted(st.Counters) != md.Counters:
		return fmt.Errorf("Stats counters %+v, model %+v", l1ref.Counted(st.Counters), md.Counters)
	case st.FreeErrors != 0:
		return fmt.Errorf("Stats: %d free errors", st.FreeErrors)
	}
	if err := md.Mem.CompareView(s.A); err != nil {
		return fmt.Errorf("allocator: %w", err)
	}
	return nil
}

// CompareState compares every object's state, in LRU order, with the
// model's. Both sides reclaim expired objects first.
func (s *System) CompareState() error {
	got := s.M.Snapshot()
	want := s.Model.Snapshot()
	if len(got) != len(want) {
		return fmt.Errorf("%d objects %v, model %d %v", len(got), entryKeys(got), len(want), entryKeys(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key {
			return fmt.Errorf("LRU order %v, model %v", entryKeys(got), entryKeys(want))
		}
		if !sameState(g.ObjectState, w.ObjectState) {
			return fmt.Errorf("key %d: state %+v, model %+v", g.Key, g.ObjectState, w.ObjectState)
		}
	}
	return nil
}

// sameState compares two states, the manager's or the model's (whose
// blocks carry no generation): blocks without generations, expiries as
// instants.
func sameState(a, b l1.ObjectState) bool {
	if !a.WriteExpiry.Equal(b.WriteExpiry) || !a.ReadExpiry.Equal(b.ReadExpiry) {
		return false
	}
	a.Block, b.Block = allocref.WithoutGen(a.Block), allocref.WithoutGen(b.Block)
	a.WriteExpiry, a.ReadExpiry, b.WriteExpiry, b.ReadExpiry = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b
}

func entryKeys(es []l1.Entry[Key]) []Key {
	out := make([]Key, len(es))
	for i, e := range es {
		out[i] = e.Key
	}
	return out
}

// Run applies ops in order and returns the first failure, naming the op's
// index; then it force-clears the manager and checks that every block came
// back.
func (s *System) Run(ops []Op) error {
	for i, op := range ops {
		if err := s.Apply(op); err != nil {
			return fmt.Errorf("op %d: %w", i, err)
		}
	}
	return s.Drain()
}

// Drain clears everything with force, closes the manager and checks that
// the allocator is back to one free extent spanning its capacity. Under
// quarantine every actor first aborts every write it reserved, as a node
// pool's owner does when the actor's connection ends: Clear leaves
// quarantined blocks alone, and holds the blocks of locked objects for
// their holders (both compared with the model); Close frees them.
func (s *System) Drain() error {
	if s.Setup.Quarantine {
		for actor, ws := range s.Book.Writes {
			if err := s.abortAll(ws); err != nil {
				return fmt.Errorf("actor %d's final abort: %w", actor, err)
			}
		}
	}
	if err := s.Apply(Op{Kind: OpClear, Force: true, Observe: true}); err != nil {
		return fmt.Errorf("final clear: %w", err)
	}
	if err := s.Apply(Op{Kind: OpClose, Observe: true}); err != nil {
		return fmt.Errorf("final close: %w", err)
	}
	st := s.A.Stats()
	if st.Used != 0 || st.FreeExtents != 1 || st.LargestFree != st.Capacity {
		return fmt.Errorf("after clearing everything: used %d, %d free extents, largest %d of %d", st.Used, st.FreeExtents, st.LargestFree, st.Capacity)
	}
	return nil
}

// abortAll presents every write lease of ws to AbortWrite, on the manager
// and the model, and compares the answers and what follows.
func (s *System) abortAll(ws []KeyLease) error {
	keys := make([]Key, len(ws))
	leases := make([]l1.Lease, len(ws))
	for i, w := range ws {
		keys[i], leases[i] = w.Key, w.Lease
	}
	got, err := s.M.AbortWrite(keys, leases)
	want, wantErr := s.Model.AbortWrite(keys, leases)
	if err := checkErr(err, wantErr); err != nil {
		return err
	}
	if wantErr == nil {
		if err := compareStatuses(got, want); err != nil {
			return err
		}
	}
	return s.AfterApply(true)
}

// Keys returns n keys start, start+1, ….
func Keys(start, n int) []Key {
	out := make([]Key, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// containsKey reports whether keys holds k.
func containsKey(keys []Key, k Key) bool { return slices.Contains(keys, k) }

// heldBy names what holds a quarantined block.
func heldBy(q l1ref.Quarantined[Key]) string {
	switch {
	case !q.Deleted:
		return "the lapsed write"
	case q.Read:
		return fmt.Sprintf("the %d read holds of the deleted key", q.Count)
	}
	return "the write reserved on the deleted key"
}
