package bench

import (
	"fmt"
	"runtime"
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
			leases := make([]l1.Lease, 0, prefixWant)
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
				granted = granted[:0]
				for i, r := range res {
					if r.Status == l1.OK {
						granted = append(granted, keys[i])
					}
				}
				total += len(granted)
				leases = leases[:0]
				for _, r := range res {
					if r.Status == l1.OK {
						leases = append(leases, r.Lease)
					}
				}
				sts, err := m.AbortWrite(granted, leases)
				if err != nil {
					b.Fatal(err)
				}
				for i, st := range sts {
					if st != l1.OK {
						b.Fatalf("AbortWrite %d: %v", i, st)
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(m.Stats().Probes-probes0)/float64(b.N), "probes/op")
			b.ReportMetric(float64(total)/float64(b.N), "granted/op")
			b.ReportMetric(float64(inMem.Nanoseconds())/float64(b.N), "alloc-ns/op")
		})
	}
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
			leases := make([]l1.Lease, n)
			b.ReportAllocs()
			for b.Loop() {
				l1Cycle(b, m, keys, leases)
			}
			perUnit(b, n, "ns/key")
		})
	}
}

// l1ParallelKeys is the batch of each goroutine of BenchmarkL1CycleParallel.
const l1ParallelKeys = 256

// BenchmarkL1CycleParallel runs the cycle of BenchmarkL1Cycle under
// b.RunParallel: GOMAXPROCS goroutines on one manager, each with its own
// 256 keys. Reports ns/key over all goroutines (wall time per key, so it
// falls as parallelism helps and rises as the manager lock contends).
func BenchmarkL1CycleParallel(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	m, _ := newManager(b, procs*l1ParallelKeys, l1.Config{})
	var seed atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		keys := cycleKeys(l1ParallelKeys, 100+seed.Add(1))
		leases := make([]l1.Lease, l1ParallelKeys)
		for pb.Next() {
			l1Cycle(b, m, keys, leases)
		}
	})
	perUnit(b, l1ParallelKeys, "ns/key")
}

// l1Cycle runs one cycle over keys and checks every status. leases, one
// per key, is the caller's buffer for the leases the cycle presents.
func l1Cycle(b *testing.B, m *l1.Manager[cycleKey], keys []cycleKey, leases []l1.Lease) {
	res, err := m.ReserveWrite(keys, nil, l1Object, l1.ModeAll)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		if r.Status != l1.OK {
			b.Fatalf("ReserveWrite: %v", r.Status)
		}
		leases[i] = r.Lease
	}
	sts, err := m.FinishWrite(keys, leases)
	mustAll(b, "FinishWrite", sts, err)
	res, err = m.ReserveRead(keys, 1)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		if r.Status != l1.OK {
			b.Fatalf("ReserveRead: %v", r.Status)
		}
		leases[i] = r.Lease
	}
	sts, err = m.FinishRead(keys, leases, 1)
	mustAll(b, "FinishRead", sts, err)
	sts, err = m.Delete(keys, false)
	mustAll(b, "Delete", sts, err)
}

func mustAll(b *testing.B, op string, sts []l1.Status, err error) {
	if err != nil {
		b.Fatalf("%s: %v", op, err)
	}
	for _, st := range sts {
		if st != l1.OK {
			b.Fatalf("%s: %v", op, st)
		}
	}
}
