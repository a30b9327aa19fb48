package bench

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// l1Object is the object size of the L1 benchmarks. The manager and the
// allocator never touch the memory, so the size only sets the pool's
// (virtual) footprint.
const l1Object = 64 * KiB

// l1Region is the region of the L1 benchmarks' pools: an anonymous mapping
// that nothing touches, so it costs nothing to make and, unlike a heap
// region of the same size, does not inflate the Go heap and with it the
// garbage collector's pacing of the manager's own allocations.
const l1Region = allocator.KindMmap

// newManager returns a manager over a pool with room for exactly room
// objects of l1Object bytes.
func newManager(b *testing.B, room int, cfg l1.Config) (*l1.Manager[cycleKey], *allocator.Allocator) {
	b.Helper()
	a := newPool(b, l1Region, int64(room)*l1Object, 0)
	m, err := l1.New[cycleKey](a, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m, a
}

// prefix is the PrefixRecovery scenario: room for 4560 objects, 5700 asked.
const (
	prefixRoom = 4560
	prefixWant = 5700
)

// BenchmarkPrefixRecovery times one ReserveWrite of 5700 new keys into a
// pool with room for 4560, the batch that does not fit. onepass and
// binarysearch grant the same 4560-key prefix, none grants nothing. Only
// the ReserveWrite is timed: the AbortWrite that returns the prefix to the
// pool runs with the timer stopped. Reports probes/op (trial allocations),
// granted/op (keys answered OK) and alloc-ns/op, the part of the op
// spent inside the memory's calls, which is where the strategies differ;
// the rest is the manager's per-key work, the same for all three. Compare
// binarysearch with onepass.
func BenchmarkPrefixRecovery(b *testing.B) {
	for _, s := range l1.PrefixStrategies {
		b.Run(fmt.Sprintf("strategy=%s/n=%d", s, prefixWant), func(b *testing.B) {
			a := newPool(b, l1Region, prefixRoom*l1Object, 0)
			mem := &timedMemory{a: a}
			m, err := l1.New[cycleKey](mem, l1.Config{Prefix: s})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			keys := cycleKeys(prefixWant, 1)
			granted := make([]cycleKey, 0, prefixWant)
			// warm: see TestAllocsPerOpIndependentOfN.
			res, err := m.ReserveWrite(keys, nil, l1Object, l1.ModeAll)
			if err != nil {
				b.Fatal(err)
			}
			abortGranted(b, m, keys, res, granted)
			probes0 := m.Stats().Probes
			total := 0
			var inMem time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := mem.spent
				res, err := m.ReserveWrite(keys, nil, l1Object, l1.ModeAll)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				inMem += mem.spent - t0
				total += abortGranted(b, m, keys, res, granted)
				b.StartTimer()
			}
			b.ReportMetric(float64(m.Stats().Probes-probes0)/float64(b.N), "probes/op")
			b.ReportMetric(float64(total)/float64(b.N), "granted/op")
			b.ReportMetric(float64(inMem.Nanoseconds())/float64(b.N), "alloc-ns/op")
		})
	}
}

// abortGranted aborts the keys that res granted, using granted's storage,
// and returns how many there were.
func abortGranted(b *testing.B, m *l1.Manager[cycleKey], keys []cycleKey, res []l1.Result, granted []cycleKey) int {
	granted = granted[:0]
	for i, r := range res {
		if r.Status == l1.OK {
			granted = append(granted, keys[i])
		}
	}
	for i, st := range m.AbortWrite(granted) {
		if st != l1.OK {
			b.Fatalf("AbortWrite %d: %v", i, st)
		}
	}
	return len(granted)
}

// timedMemory is an allocator that adds up the time spent in its calls. It
// has every optional interface the manager looks for, so the manager
// treats it as it treats the allocator. Not safe for concurrent use: the
// manager calls it under its lock, and the benchmark reads spent between
// calls.
type timedMemory struct {
	a     *allocator.Allocator
	spent time.Duration
}

func (t *timedMemory) AllocateBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	t0 := time.Now()
	bs, err := t.a.AllocateBatch(size, n, p)
	t.spent += time.Since(t0)
	return bs, err
}

func (t *timedMemory) AllocateUpTo(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	t0 := time.Now()
	bs, err := t.a.AllocateUpTo(size, n, p)
	t.spent += time.Since(t0)
	return bs, err
}

func (t *timedMemory) Fit(size int64, n int) int {
	t0 := time.Now()
	k := t.a.Fit(size, n)
	t.spent += time.Since(t0)
	return k
}

func (t *timedMemory) Free(blocks ...allocator.Block) error {
	t0 := time.Now()
	err := t.a.Free(blocks...)
	t.spent += time.Since(t0)
	return err
}

func (t *timedMemory) Stats() allocator.Stats { return t.a.Stats() }

// The manager must see timedMemory as it sees the allocator.
var (
	_ l1.Memory        = (*timedMemory)(nil)
	_ l1.UpToAllocator = (*timedMemory)(nil)
	_ l1.Fitter        = (*timedMemory)(nil)
)

// l1CycleKeys are the batch sizes of BenchmarkL1Cycle.
var l1CycleKeys = []int{256, 5700}

// BenchmarkL1Cycle times the life of a batch of N keys in the manager:
// ReserveWrite of new keys (one batch allocation), FinishWrite,
// ReserveRead, FinishRead, and the Delete that frees them so the next op
// starts from the same state. Reports ns/key; compare with Floor/map, which
// inserts, looks up and deletes each key once.
func BenchmarkL1Cycle(b *testing.B) {
	for _, n := range l1CycleKeys {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			m, _ := newManager(b, n, l1.Config{})
			keys := cycleKeys(n, 2)
			l1Cycle(b, m, keys) // warm: see TestAllocsPerOpIndependentOfN
			b.ReportAllocs()
			for b.Loop() {
				l1Cycle(b, m, keys)
			}
			perUnit(b, n, "ns/key")
		})
	}
}

// l1ParallelKeys is the batch of each goroutine of BenchmarkL1CycleParallel.
const l1ParallelKeys = 256

// BenchmarkL1CycleParallel runs the cycle of BenchmarkL1Cycle on
// GOMAXPROCS goroutines on one manager, each with its own 256 keys, taking
// the b.N cycles from a shared counter as b.RunParallel would. Reports
// ns/key over all goroutines (wall time per key, so it falls as
// parallelism helps and rises as the manager lock contends).
//
// It does not use b.RunParallel: that allocates its goroutines and their
// state inside the timed region, a fixed cost per run that made allocs/op
// depend on b.N (13 at 1 iteration, 5 at 100). Here the goroutines start,
// and every key set is cycled once, before the timer starts.
func BenchmarkL1CycleParallel(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	m, _ := newManager(b, procs*l1ParallelKeys, l1.Config{})
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range procs {
		keys := cycleKeys(l1ParallelKeys, 101+uint64(i))
		l1Cycle(b, m, keys) // warm: see TestAllocsPerOpIndependentOfN
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for next.Add(1) <= int64(b.N) {
				l1Cycle(b, m, keys)
			}
		}()
	}
	b.ReportAllocs()
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	perUnit(b, l1ParallelKeys, "ns/key")
}

// l1Cycle runs one cycle over keys and checks every status.
func l1Cycle(b *testing.B, m *l1.Manager[cycleKey], keys []cycleKey) {
	res, err := m.ReserveWrite(keys, nil, l1Object, l1.ModeAll)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Status != l1.OK {
			b.Fatalf("ReserveWrite: %v", r.Status)
		}
	}
	mustAll(b, "FinishWrite", m.FinishWrite(keys))
	res, err = m.ReserveRead(keys, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Status != l1.OK {
			b.Fatalf("ReserveRead: %v", r.Status)
		}
	}
	sts, err := m.FinishRead(keys, 1)
	if err != nil {
		b.Fatal(err)
	}
	mustAll(b, "FinishRead", sts)
	mustAll(b, "Delete", m.Delete(keys, false))
}

func mustAll(b *testing.B, op string, sts []l1.Status) {
	for _, st := range sts {
		if st != l1.OK {
			b.Fatalf("%s: %v", op, st)
		}
	}
}
