package bench

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
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
const l1Region = hostmem.KindMmap

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
			// warm: see TestAllocsPerOpIndependentOfN.
			res, err := m.ReserveWrite(keys, nil, l1Object, l1.ModeAll)
			if err != nil {
				b.Fatal(err)
			}
			abortGranted(b, m, keys, res, granted, leases)
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
				total += abortGranted(b, m, keys, res, granted, leases)
				b.StartTimer()
			}
			b.ReportMetric(float64(m.Stats().Probes-probes0)/float64(b.N), "probes/op")
			b.ReportMetric(float64(total)/float64(b.N), "granted/op")
			b.ReportMetric(float64(inMem.Nanoseconds())/float64(b.N), "alloc-ns/op")
		})
	}
	// The floor of the prefix: a reservation of 4560 keys that fits, the
	// work any strategy must do to grant 4560. onepass ÷ this is what the
	// search for the prefix costs on top.
	b.Run(fmt.Sprintf("fit/n=%d", prefixRoom), func(b *testing.B) {
		// Over the same timed memory as the strategies, so that the
		// ratio is the prefix's cost alone.
		m, err := l1.New[cycleKey](&timedMemory{a: newPool(b, l1Region, prefixRoom*l1Object, 0)}, l1.Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		keys := cycleKeys(prefixRoom, 1)
		leases := make([]l1.Lease, prefixRoom)
		// warm: see TestAllocsPerOpIndependentOfN.
		res, err := m.ReserveWrite(keys, nil, l1Object, l1.ModeAll)
		if err != nil {
			b.Fatal(err)
		}
		mustGrant(b, res, leases)
		sts, err := m.AbortWrite(keys, leases)
		mustAll(b, "AbortWrite", sts, err)
		b.ReportAllocs()
		for b.Loop() {
			res, err := m.ReserveWrite(keys, nil, l1Object, l1.ModeAll)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			mustGrant(b, res, leases)
			sts, err := m.AbortWrite(keys, leases)
			mustAll(b, "AbortWrite", sts, err)
			b.StartTimer()
		}
		b.ReportMetric(float64(prefixRoom), "granted/op")
	})
}

// abortGranted aborts the keys that res granted, using granted's storage,
// and returns how many there were.
func abortGranted(b *testing.B, m *l1.Manager[cycleKey], keys []cycleKey, res []l1.Result, granted []cycleKey, leases []l1.Lease) int {
	granted, leases = granted[:0], leases[:0]
	for i, r := range res {
		if r.Status == l1.OK {
			granted = append(granted, keys[i])
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

// Capacity and Align make timedMemory an l1.Sizer, as the allocator is.
// They read immutable fields and are not timed.
func (t *timedMemory) Capacity() int64 { return t.a.Capacity() }

// Align is the allocator's alignment; see Capacity.
func (t *timedMemory) Align() int64 { return t.a.Align() }

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

// The production regime: 8 MiB objects, 5700 of them in a 45 GiB pool.
const (
	prodObject = 8 * MiB
	prodKeys   = 5700
)

// newProdManager returns a manager over a MAP_NORESERVE pool with room for
// exactly room objects of size bytes (4 KiB alignment): address space the
// allocator and the manager never touch, so 45 GiB cost no RAM. It skips
// where such a region cannot be had.
func newProdManager(b *testing.B, room int, size int64, mem func(*allocator.Allocator) l1.Memory, cfg l1.Config) (*l1.Manager[cycleKey], *allocator.Allocator) {
	b.Helper()
	r, err := newNoReserveRegion(int64(room) * size)
	if err != nil {
		b.Skipf("no %d-byte MAP_NORESERVE region: %v", int64(room)*size, err)
	}
	a, err := allocator.New(r, allocator.Options{})
	if err != nil {
		r.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	var memory l1.Memory = a
	if mem != nil {
		memory = mem(a)
	}
	m, err := l1.New[cycleKey](memory, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m, a
}

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
			l1Cycle(b, m, keys, leases) // warm: see TestAllocsPerOpIndependentOfN
			b.ReportAllocs()
			for b.Loop() {
				l1Cycle(b, m, keys, leases)
			}
			perUnit(b, n, "ns/key")
		})
	}
	// The production regime: 5700 keys of 8 MiB in a 45 GiB pool.
	b.Run(fmt.Sprintf("size=8MiB/keys=%d", prodKeys), func(b *testing.B) {
		m, _ := newProdManager(b, prodKeys, prodObject, nil, l1.Config{})
		keys := cycleKeys(prodKeys, 2)
		leases := make([]l1.Lease, prodKeys)
		l1CycleSized(b, m, keys, leases, prodObject) // warm: see TestAllocsPerOpIndependentOfN
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			l1CycleSized(b, m, keys, leases, prodObject)
		}
		perUnit(b, prodKeys, "ns/key")
		cpu.report(b, prodKeys, "ns/key") // DaemonCycle's floor, on CPU too
	})
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
		leases := make([]l1.Lease, l1ParallelKeys)
		l1Cycle(b, m, keys, leases) // warm: see TestAllocsPerOpIndependentOfN
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for next.Add(1) <= int64(b.N) {
				l1Cycle(b, m, keys, leases)
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

// l1Cycle runs one cycle over keys and checks every status. leases, one
// per key, is the caller's buffer for the leases the cycle presents.
func l1Cycle(b *testing.B, m *l1.Manager[cycleKey], keys []cycleKey, leases []l1.Lease) {
	l1CycleSized(b, m, keys, leases, l1Object)
}

func l1CycleSized(b *testing.B, m *l1.Manager[cycleKey], keys []cycleKey, leases []l1.Lease, size int64) {
	res, err := m.ReserveWrite(keys, nil, size, l1.ModeAll)
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

// fitOnly is the allocator without FreeAround: on-demand eviction over it
// calls Fit after every victim, as it did before it counted free runs.
type fitOnly struct{ a *allocator.Allocator }

func (f fitOnly) AllocateBatch(size int64, n int, p allocator.Placement) ([]allocator.Block, error) {
	return f.a.AllocateBatch(size, n, p)
}
func (f fitOnly) Free(blocks ...allocator.Block) error { return f.a.Free(blocks...) }
func (f fitOnly) Stats() allocator.Stats               { return f.a.Stats() }
func (f fitOnly) Fit(size int64, n int) int            { return f.a.Fit(size, n) }

// BenchmarkEvictOnDemand times one ReserveWrite of 5700 new 8 MiB keys into
// a full 45 GiB pool of 5700 evictable objects: on-demand eviction takes
// every one. victims=adjacent evicts them in address order, so each victim
// merges with the one before; victims=scattered evicts every other object
// first, so the first 2850 victims each leave a free extent of their own.
// The reordering between ops (FinishWrite, one Touch per key) is not timed.
// Reports ns/victim. memory=fit-only is the same over a memory without
// FreeAround, where eviction calls Fit after each victim: the cost before
// eviction counted free runs, which grows with the free extents.
func BenchmarkEvictOnDemand(b *testing.B) {
	for _, mem := range []string{"allocator", "fit-only"} {
		for _, victims := range []string{"adjacent", "scattered"} {
			name := "victims=" + victims
			var wrap func(*allocator.Allocator) l1.Memory
			if mem == "fit-only" {
				name += "/memory=fit-only"
				wrap = func(a *allocator.Allocator) l1.Memory { return fitOnly{a} }
			}
			b.Run(name, func(b *testing.B) {
				m, _ := newProdManager(b, prodKeys, prodObject, wrap, l1.Config{EvictOnDemand: true})
				cur, next := cycleKeys(prodKeys, 3), cycleKeys(prodKeys, 4)
				leases := make([]l1.Lease, prodKeys)
				settle := func(keys []cycleKey, res []l1.Result) {
					mustGrant(b, res, leases)
					sts, err := m.FinishWrite(keys, leases)
					mustAll(b, "FinishWrite", sts, err)
					// Rank the objects for eviction: by address, or every
					// other one first.
					idx := make([]int, len(keys))
					for i := range idx {
						idx[i] = i
					}
					slices.SortFunc(idx, func(x, y int) int { return cmp.Compare(res[x].Block.Offset, res[y].Block.Offset) })
					if victims == "scattered" {
						var even, odd []int
						for j, i := range idx {
							if j%2 == 0 {
								even = append(even, i)
							} else {
								odd = append(odd, i)
							}
						}
						idx = append(even, odd...)
					}
					for _, i := range idx {
						if err := m.Touch(keys[i : i+1]); err != nil {
							b.Fatal(err)
						}
					}
				}
				res, err := m.ReserveWrite(cur, nil, prodObject, l1.ModeAll)
				if err != nil {
					b.Fatal(err)
				}
				settle(cur, res)
				// warm: one op before timing (TestAllocsPerOpIndependentOfN).
				res, err = m.ReserveWrite(next, nil, prodObject, l1.ModeAll)
				if err != nil {
					b.Fatal(err)
				}
				settle(next, res)
				cur, next = next, cur
				b.ReportAllocs()
				for b.Loop() {
					res, err := m.ReserveWrite(next, nil, prodObject, l1.ModeAll)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					settle(next, res)
					cur, next = next, cur
					b.StartTimer()
				}
				if got := m.Stats().OnDemandEvictions; got < uint64(b.N*prodKeys) {
					b.Fatalf("%d on-demand evictions in %d ops, want %d each", got, b.N, prodKeys)
				}
				perUnit(b, prodKeys, "ns/victim")
			})
		}
	}
}

// evictPastCold is the number of unevictable objects at the cold end in
// BenchmarkEvictPastLocked.
const evictPastCold = 100_000

// BenchmarkEvictPastLocked times a 16-key ReserveWrite and its FinishWrite
// into a full pool whose 100,000 least recently used objects cannot be
// evicted: temporary objects nobody has read yet (cold=temporary) or
// read-locked ones (cold=read-locked), and 1024 evictable ones behind them;
// cold=none has the 1024 alone. Each op evicts the 16 coldest evictable
// objects. Compare cold=temporary and cold=read-locked with cold=none:
// eviction that skips what it cannot evict without walking it costs the
// same (it re-walked all 100,000 on every call before).
func BenchmarkEvictPastLocked(b *testing.B) {
	const warm, batch = 1024, 16
	for _, cold := range []string{"none", "temporary", "read-locked"} {
		b.Run("cold="+cold, func(b *testing.B) {
			n := 0
			if cold != "none" {
				n = evictPastCold
			}
			m, _ := newProdManager(b, n+warm, l1Object, nil, l1.Config{EvictOnDemand: true, ReadTTL: time.Hour})
			coldKeys := cycleKeys(n, 5)
			for lo := 0; lo < n; lo += 10_000 {
				ks := coldKeys[lo:min(n, lo+10_000)]
				var temp []bool
				if cold == "temporary" {
					temp = make([]bool, len(ks))
					for i := range temp {
						temp[i] = true
					}
				}
				res, err := m.ReserveWrite(ks, temp, l1Object, l1.ModeAll)
				if err != nil {
					b.Fatal(err)
				}
				leases := make([]l1.Lease, len(ks))
				mustGrant(b, res, leases)
				sts, err := m.FinishWrite(ks, leases)
				mustAll(b, "FinishWrite", sts, err)
				if cold == "read-locked" {
					if _, err := m.ReserveRead(ks, 1); err != nil {
						b.Fatal(err)
					}
				}
			}
			// A ring of 65 groups of 16 keys: 64 resident, the next one
			// evicts the coldest.
			ring := cycleKeys((warm/batch+1)*batch, 6)
			groups := len(ring) / batch
			for g := 0; g < groups-1; g++ {
				ks := ring[g*batch : (g+1)*batch]
				res, err := m.ReserveWrite(ks, nil, l1Object, l1.ModeAll)
				if err != nil {
					b.Fatal(err)
				}
				leases := make([]l1.Lease, batch)
				mustGrant(b, res, leases)
				sts, err := m.FinishWrite(ks, leases)
				mustAll(b, "FinishWrite", sts, err)
			}
			g := groups - 1
			leases := make([]l1.Lease, batch)
			op := func() {
				ks := ring[g*batch : (g+1)*batch]
				res, err := m.ReserveWrite(ks, nil, l1Object, l1.ModeAll)
				if err != nil {
					b.Fatal(err)
				}
				mustGrant(b, res, leases)
				sts, err := m.FinishWrite(ks, leases)
				mustAll(b, "FinishWrite", sts, err)
				g = (g + 1) % groups
			}
			// warm: one turn of the ring, so every group has been
			// evicted and stored once (TestAllocsPerOpIndependentOfN).
			for range groups {
				op()
			}
			b.ReportAllocs()
			for b.Loop() {
				op()
			}
		})
	}
}

// mustGrant checks that every key got OK and copies the leases.
func mustGrant(b *testing.B, res []l1.Result, leases []l1.Lease) {
	for i, r := range res {
		if r.Status != l1.OK {
			b.Fatalf("ReserveWrite: %v", r.Status)
		}
		leases[i] = r.Lease
	}
}
