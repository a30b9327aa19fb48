package bench

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// contentionProcs are the GOMAXPROCS values BenchmarkContention runs each
// hot path at, inside one binary: make bench runs one -cpu value, and the
// ratio of the two rows is the point.
var contentionProcs = []int{1, 2}

// contentionOp is one hot path of BenchmarkContention: setup builds its
// state at production size and returns the body each of the GOMAXPROCS
// goroutines of b.RunParallel runs, given its index g among procs.
type contentionOp struct {
	name  string
	setup func(b *testing.B, procs int) func(pb *testing.PB, g int)
}

var contentionOps = []contentionOp{
	{"lookup", setupContendedLookup},
	{"store", setupContendedStore},
	{"allocate", setupContendedAllocate},
	{"mutex", setupContendedMutex},
	{"ceiling", setupUncontended},
}

// BenchmarkContention runs each hot path on b.RunParallel at GOMAXPROCS 1
// and 2 (sub-benchmarks procs=P, which set it), at production size: 8 MiB
// objects in a 45 GiB MAP_NORESERVE pool of 5700. Reports ops/s; procs=2 ÷
// procs=1 is how the path scales with a second core.
//
//   - op=lookup: ReserveReadPrefix of one stored key and its FinishRead;
//     each goroutine reads its own keys of the 5700 stored.
//   - op=store: ReserveWrite of one new key and its FinishWrite into the
//     full pool, on-demand eviction making room (one victim, whose block
//     is reissued: scattered placement); each goroutine writes its own
//     keys.
//   - op=allocate: the allocator's single-block pair, Allocate and Free
//     of one 8 MiB block.
//   - op=mutex: a sync.Mutex lock, a bump and an unlock, Floor/mutex
//     under contention: what any design with one lock per call gets.
//   - op=ceiling: the same bump on a mutex of each goroutine's own, so
//     nothing is shared: procs=2 ÷ procs=1 is the speed-up this machine
//     gives a second goroutine in this run (below 2 on a loaded or
//     hyper-threaded machine), the ceiling the other rows are read
//     against.
//
// The manager and the allocator each take one mutex per call, so a second
// core helps only as far as the work outside the lock (building the
// result slices, hashing keys) goes; l1/DESIGN.md, "Contention", has the
// numbers and the profile.
//
// It skips under TestAllocsPerOpIndependentOfN: b.RunParallel allocates
// its goroutines' state inside the timed region (about two allocations
// per goroutine per run, divided by b.N), which is the iteration-count
// dependence that test forbids; at the iteration counts of make bench it
// rounds away.
func BenchmarkContention(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("b.RunParallel allocates inside the timed region; see the doc comment")
	}
	for _, op := range contentionOps {
		for _, procs := range contentionProcs {
			b.Run(fmt.Sprintf("op=%s/procs=%d", op.name, procs), func(b *testing.B) {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
				body := op.setup(b, procs)
				var next atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					body(pb, int(next.Add(1)-1))
				})
				b.StopTimer()
				if s := b.Elapsed().Seconds(); s > 0 {
					b.ReportMetric(float64(b.N)/s, "ops/s")
				}
			})
		}
	}
}

// setupContendedLookup stores the 5700 keys of a full production pool and
// gives goroutine g every procs-th of them to read.
func setupContendedLookup(b *testing.B, procs int) func(*testing.PB, int) {
	m, _ := newProdManager(b, prodKeys, prodObject, l1.Config{})
	keys := cycleKeys(prodKeys, 300)
	storeAll(b, m, keys)
	return func(pb *testing.PB, g int) {
		var lease [1]l1.Lease
		i := g
		for pb.Next() {
			key := keys[i : i+1]
			res, n, err := m.ReserveReadPrefix(key, 1)
			if err != nil || n != 1 {
				b.Errorf("ReserveReadPrefix: %d of 1 locked, %v", n, err)
				return
			}
			lease[0] = res[0].Lease
			sts, err := m.FinishRead(key, lease[:], 1)
			if err != nil || sts[0] != l1.OK {
				b.Errorf("FinishRead: %v, %v", sts, err)
				return
			}
			if i += procs; i >= len(keys) {
				i = g
			}
		}
	}
}

// storeAll writes keys as finished objects of prodObject bytes.
func storeAll(b *testing.B, m *l1.Manager[cycleKey], keys []cycleKey) {
	res, err := m.ReserveWrite(keys, nil, prodObject, l1.ModeAll)
	if err != nil {
		b.Fatal(err)
	}
	leases := make([]l1.Lease, len(keys))
	mustGrant(b, res, leases)
	sts, err := m.FinishWrite(keys, leases)
	mustAll(b, "FinishWrite", sts, err)
}

// setupContendedStore fills a production pool with 5700 finished objects
// and gives each goroutine a ring of 2 × 5700 keys of its own, so that a
// key comes round only after the least recently used policy has evicted
// it.
func setupContendedStore(b *testing.B, procs int) func(*testing.PB, int) {
	m, _ := newProdManager(b, prodKeys, prodObject, l1.Config{EvictOnDemand: true, Placement: allocator.Scattered})
	storeAll(b, m, cycleKeys(prodKeys, 400))
	rings := make([][]cycleKey, procs)
	for g := range rings {
		rings[g] = cycleKeys(2*prodKeys, 500+uint64(g))
	}
	return func(pb *testing.PB, g int) {
		ring := rings[g]
		var lease [1]l1.Lease
		i := 0
		for pb.Next() {
			key := ring[i : i+1]
			res, err := m.ReserveWrite(key, nil, prodObject, l1.ModeAll)
			if err != nil || res[0].Status != l1.OK {
				b.Errorf("ReserveWrite: %v, %v", res, err)
				return
			}
			lease[0] = res[0].Lease
			sts, err := m.FinishWrite(key, lease[:])
			if err != nil || sts[0] != l1.OK {
				b.Errorf("FinishWrite: %v, %v", sts, err)
				return
			}
			if i++; i == len(ring) {
				i = 0
			}
		}
	}
}

// setupContendedAllocate makes an allocator over a 45 GiB MAP_NORESERVE
// pool; each goroutine allocates and frees one 8 MiB block at a time.
func setupContendedAllocate(b *testing.B, procs int) func(*testing.PB, int) {
	r, err := newNoReserveRegion(prodKeys * prodObject)
	if err != nil {
		b.Skipf("no %d-byte MAP_NORESERVE region: %v", prodKeys*prodObject, err)
	}
	a, err := allocator.New(r, allocator.Options{})
	if err != nil {
		r.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	return func(pb *testing.PB, g int) {
		for pb.Next() {
			blk, err := a.Allocate(prodObject)
			if err == nil {
				err = a.Free(blk)
			}
			if err != nil {
				b.Errorf("Allocate+Free: %v", err)
				return
			}
		}
	}
}

// setupContendedMutex is Floor/mutex shared by every goroutine.
func setupContendedMutex(b *testing.B, procs int) func(*testing.PB, int) {
	var mu sync.Mutex
	z := bumpArena{size: prodObject, capacity: prodKeys * prodObject}
	return func(pb *testing.PB, g int) {
		var blk allocator.Block
		for pb.Next() {
			mu.Lock()
			blk = z.next()
			mu.Unlock()
		}
		mu.Lock()
		sinkBlock = blk
		mu.Unlock()
	}
}

// setupUncontended is op=mutex with a mutex and an arena per goroutine.
func setupUncontended(b *testing.B, procs int) func(*testing.PB, int) {
	var out sync.Mutex
	return func(pb *testing.PB, g int) {
		var mu sync.Mutex
		z := bumpArena{size: prodObject, capacity: prodKeys * prodObject}
		var blk allocator.Block
		for pb.Next() {
			mu.Lock()
			blk = z.next()
			mu.Unlock()
		}
		out.Lock()
		sinkBlock = blk
		out.Unlock()
	}
}
