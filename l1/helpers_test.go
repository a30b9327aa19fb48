package l1_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/l1"
)

const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20

	// obj is the object size of most tests: one 4 KiB page.
	obj = 4 * KiB
)

// clock is a manual clock for lock lifetimes.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// recorder is a listener that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []l1.Event[int]
}

func (r *recorder) listen(e l1.Event[int]) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// take returns the events recorded since the last take.
func (r *recorder) take() []l1.Event[int] {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// last returns the keys of the last event of kind, or nil.
func (r *recorder) last(kind l1.EventKind) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == kind {
			return r.events[i].Keys
		}
	}
	return nil
}

// env is a manager over a real allocator, with a manual clock and a
// recording listener.
type env struct {
	t   testing.TB
	m   *l1.Manager[int]
	a   *allocator.Allocator
	mem l1.Memory // the manager's memory: a, or a wrapper of it
	clk *clock
	rec *recorder
}

func newAlloc(t testing.TB, capacity, align int64) *allocator.Allocator {
	t.Helper()
	r, err := hostmem.NewHeapRegion(capacity)
	require.NoError(t, err)
	a, err := allocator.New(r, allocator.Options{Align: align})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a
}

// newEnv returns a manager over a fresh allocator of capacity bytes with
// 4 KiB alignment.
func newEnv(t testing.TB, capacity int64, cfg l1.Config) *env {
	t.Helper()
	a := newAlloc(t, capacity, 4*KiB)
	return newEnvOver(t, a, a, cfg)
}

// newEnvOver returns a manager over mem; a, if not nil, is the allocator
// under it.
func newEnvOver(t testing.TB, a *allocator.Allocator, mem l1.Memory, cfg l1.Config) *env {
	t.Helper()
	e := &env{t: t, a: a, mem: mem, clk: newClock(), rec: &recorder{}}
	if cfg.Now == nil {
		cfg.Now = e.clk.Now
	}
	m, err := l1.New[int](mem, cfg)
	require.NoError(t, err)
	m.AddListenerFunc(e.rec.listen)
	e.m = m
	return e
}

// under returns mem as a manager configured by cfg sees it under prefix
// strategy s: mem itself for onepass, LMCache's baseline over it
// otherwise (see baseline.Strategy.Wrap).
func under(s baseline.Strategy, mem l1.Memory, cfg l1.Config) l1.Memory {
	return s.Wrap(mem, cfg.EvictOnDemand)
}

// newStrategyEnv is newEnv under prefix strategy s.
func newStrategyEnv(t testing.TB, capacity int64, s baseline.Strategy, cfg l1.Config) *env {
	t.Helper()
	a := newAlloc(t, capacity, 4*KiB)
	return newEnvOver(t, a, under(s, a, cfg), cfg)
}

// calls returns the allocation calls made to the memory under the
// manager: the baseline wrapper's count, or the manager's own over the
// memory itself.
func (e *env) calls() uint64 {
	if c, ok := e.mem.(baseline.Counter); ok {
		return c.Counts().Calls
	}
	return e.m.Stats().AllocCalls
}

// probes returns the baseline search's trial allocations (0 for the other
// strategies, which make none).
func (e *env) probes() uint64 {
	if c, ok := e.mem.(baseline.Counter); ok {
		return c.Counts().Probes
	}
	return 0
}

// keys returns n consecutive keys from lo.
func keys(lo, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = lo + i
	}
	return out
}

func statuses(rs []l1.Result) []l1.Status {
	out := make([]l1.Status, len(rs))
	for i, r := range rs {
		out[i] = r.Status
	}
	return out
}

// leasesOf returns the leases of rs.
func leasesOf(rs []l1.Result) []l1.Lease {
	out := make([]l1.Lease, len(rs))
	for i, r := range rs {
		out[i] = r.Lease
	}
	return out
}

// repeat returns n copies of s.
func repeat(s l1.Status, n int) []l1.Status {
	out := make([]l1.Status, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// reserve calls ReserveWrite in mode all, no temporary keys, and requires
// no error.
func (e *env) reserve(t testing.TB, ks []int, size int64) []l1.Result {
	t.Helper()
	rs, err := e.m.ReserveWrite(ks, nil, size, l1.ModeAll)
	require.NoError(t, err)
	require.Len(t, rs, len(ks))
	return rs
}

// put reserves and finishes the keys, requiring success.
func (e *env) put(t testing.TB, ks []int, size int64) []l1.Result {
	t.Helper()
	rs := e.reserve(t, ks, size)
	require.Equal(t, repeat(l1.OK, len(ks)), statuses(rs))
	require.Equal(t, repeat(l1.OK, len(ks)), e.finish(ks))
	return rs
}

// putTemp reserves the keys as temporary and finishes them.
func (e *env) putTemp(t testing.TB, ks []int, size int64) {
	t.Helper()
	temp := make([]bool, len(ks))
	for i := range temp {
		temp[i] = true
	}
	rs, err := e.m.ReserveWrite(ks, temp, size, l1.ModeAll)
	require.NoError(t, err)
	require.Equal(t, repeat(l1.OK, len(ks)), statuses(rs))
	require.Equal(t, repeat(l1.OK, len(ks)), e.finish(ks))
}

func (e *env) read(t testing.TB, ks []int, locks int) []l1.Result {
	t.Helper()
	rs, err := e.m.ReserveRead(ks, locks)
	require.NoError(t, err)
	return rs
}

func (e *env) finishRead(t testing.TB, ks []int, locks int) []l1.Status {
	t.Helper()
	st, err := e.fr(ks, locks)
	require.NoError(t, err)
	return st
}

// The helpers below act as an honest holder of every lock: they present the
// current holders' leases, read from a Snapshot. Tests of the lease protocol
// itself pass leases explicitly. They report errors with Errorf, so
// goroutines may use them.

// wl returns the keys' current write leases (0 where none).
func (e *env) wl(ks []int) []l1.Lease {
	return e.leases(ks, func(s l1.ObjectState) l1.Lease { return s.WriteLease })
}

// rl returns the keys' current read leases (0 where none).
func (e *env) rl(ks []int) []l1.Lease {
	return e.leases(ks, func(s l1.ObjectState) l1.Lease { return s.ReadLease })
}

// leases reads one lease of each key's object (0 where none) from one
// Snapshot, not a State call per key: under the invariants tag every call
// checks the whole manager, so thousands of State calls over thousands of
// objects would cost O(n²).
func (e *env) leases(ks []int, lease func(l1.ObjectState) l1.Lease) []l1.Lease {
	byKey := make(map[int]l1.Lease, len(ks))
	for _, o := range e.m.Snapshot() {
		byKey[o.Key] = lease(o.ObjectState)
	}
	out := make([]l1.Lease, len(ks))
	for i, k := range ks {
		out[i] = byKey[k]
	}
	return out
}

func (e *env) noErr(err error, call string) {
	if err != nil {
		assert.Fail(e.t, fmt.Sprintf("%s: unexpected error %v", call, err))
	}
}

func (e *env) finish(ks []int) []l1.Status {
	st, err := e.m.FinishWrite(ks, e.wl(ks))
	e.noErr(err, "FinishWrite")
	return st
}

func (e *env) abort(ks []int) []l1.Status {
	st, err := e.m.AbortWrite(ks, e.wl(ks))
	e.noErr(err, "AbortWrite")
	return st
}

func (e *env) fwrr(ks []int, locks int) ([]l1.Result, error) {
	return e.m.FinishWriteAndReserveRead(ks, e.wl(ks), locks)
}

func (e *env) fr(ks []int, locks int) ([]l1.Status, error) {
	return e.m.FinishRead(ks, e.rl(ks), locks)
}

func (e *env) unsafeRead(ks []int) []l1.Result {
	rs, err := e.m.UnsafeRead(ks)
	e.noErr(err, "UnsafeRead")
	return rs
}

func (e *env) del(ks []int, force bool) []l1.Status {
	st, err := e.m.Delete(ks, force)
	e.noErr(err, "Delete")
	return st
}

func (e *env) touch(ks []int) {
	e.noErr(e.m.Touch(ks), "Touch")
}

func (e *env) state(t testing.TB, k int) l1.ObjectState {
	t.Helper()
	s, ok := e.m.State(k)
	require.True(t, ok, "key %d has no object", k)
	return s
}

// used returns the allocator's used bytes.
func (e *env) used() int64 { return e.a.Stats().Used }

// slotsFit is the slow, obviously correct reference for the largest
// prefix: min(n, Σ⌊extent/size⌋) over the free extents, or for Contiguous
// placement the most one extent holds. size is the aligned size.
func slotsFit(extents []allocator.Block, size int64, n int, p allocator.Placement) int {
	total := int64(0)
	for _, e := range extents {
		if p == allocator.Contiguous {
			total = max(total, e.Size/size)
		} else {
			total += e.Size / size
		}
	}
	return int(min(total, int64(n)))
}

// countMem is a synthetic Memory holding up to capacity objects of any
// size, at offsets that only grow. It records every call: the n of each
// AppendBatch, successful or not, the n of each AppendUpTo, and the
// number of blocks of each free. It cannot bound its bytes (Capacity is
// math.MaxInt64), so the manager asks it for every missing key; no block
// has a free neighbour (FreeAround answers 0, 0), and its unit is align
// (1 unless set).
type countMem struct {
	mu        sync.Mutex
	capacity  int
	objSize   int64
	align     int64
	live      map[int64]bool
	next      int64
	calls     []int
	upToCalls []int
	freed     []int
	fail      error // returned by every allocation when set
}

func newCountMem(capacity int, objSize int64) *countMem {
	return &countMem{capacity: capacity, objSize: objSize, align: 1, live: map[int64]bool{}}
}

func (c *countMem) AppendBatch(dst []allocator.Block, size int64, n int, _ allocator.Placement) ([]allocator.Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, n)
	return c.allocLocked(dst, size, n, false)
}

func (c *countMem) AppendUpTo(dst []allocator.Block, size int64, n int, _ allocator.Placement) ([]allocator.Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.upToCalls = append(c.upToCalls, n)
	return c.allocLocked(dst, size, n, true)
}

func (c *countMem) allocLocked(dst []allocator.Block, size int64, n int, upTo bool) ([]allocator.Block, error) {
	if c.fail != nil {
		return dst, c.fail
	}
	free := c.capacity - len(c.live)
	if n > free {
		if !upTo {
			return dst, fmt.Errorf("%w: %d of %d", allocator.ErrOutOfMemory, n, free)
		}
		n = free
	}
	for range n {
		dst = append(dst, allocator.Block{Offset: c.next, Size: size})
		c.live[c.next] = true
		c.next += size
	}
	return dst, nil
}

// AppendReissue hands live blocks back under the next generation.
func (c *countMem) AppendReissue(dst []allocator.Block, blocks []allocator.Block) ([]allocator.Block, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range blocks {
		if !c.live[b.Offset] {
			return dst, fmt.Errorf("%w: %v", allocator.ErrInvalidBlock, b)
		}
	}
	for _, b := range blocks {
		b.Gen++
		dst = append(dst, b)
	}
	return dst, nil
}

func (c *countMem) Free(blocks ...allocator.Block) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range blocks {
		if !c.live[b.Offset] {
			return fmt.Errorf("%w: %v", allocator.ErrInvalidBlock, b)
		}
	}
	for _, b := range blocks {
		delete(c.live, b.Offset)
	}
	c.freed = append(c.freed, len(blocks))
	return nil
}

func (c *countMem) Fit(_ int64, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(0, min(n, c.capacity-len(c.live)))
}

func (c *countMem) FreeAround(allocator.Block) (before, after int64) { return 0, 0 }
func (c *countMem) Align() int64                                     { return c.align }
func (c *countMem) Capacity() int64                                  { return math.MaxInt64 }

func (c *countMem) Stats() allocator.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	used := int64(len(c.live)) * c.objSize
	capacity := int64(c.capacity) * c.objSize
	return allocator.Stats{Capacity: capacity, Used: used, Free: capacity - used, LiveBlocks: int64(len(c.live))}
}

func (c *countMem) record() (calls, freed []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls), slices.Clone(c.freed)
}

var errBroken = errors.New("memory broken")
