package bench

import (
	"math"
	"runtime"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

// The allocator's own allocation contract (0 allocs for Allocate and Free,
// 0 for AppendBatch with a caller slice, exactly 1 for AllocateBatch) is
// asserted by TestZeroAllocs in package allocator; it is not repeated here.

// TestL1Allocs asserts how the manager's calls allocate, as counts that do
// not depend on timing:
//
//   - FinishWrite, ReserveRead and FinishRead allocate their result slices
//     and nothing per key: the same count for 16 keys as for 1024.
//   - ReserveWrite of new keys and their Delete allocate nothing per key
//     either, once the manager's record chunks and index have grown: the
//     same count for 16 keys as for 1024 (today 2: the result slices).
//
// A per-key allocation slipping into any of these calls fails here before
// it shows in BenchmarkL1Cycle. The counts hold under the race detector
// too, so make test checks them.
func TestL1Allocs(t *testing.T) {
	type counts struct{ reserveDelete, finishWrite, read float64 }
	measure := func(n int) counts {
		a := newPool(t, l1Region, int64(n)*l1Object, 0)
		m, err := l1.New[cycleKey](a, l1.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		keys := cycleKeys(n, 7)
		leases := make([]l1.Lease, n)
		st := func(sts []l1.Status, err error) { mustStatus(t, sts, err) }
		ok := func(res []l1.Result, err error) {
			mustOK(t, res, err)
			for i, r := range res {
				leases[i] = r.Lease
			}
		}
		var c counts
		c.reserveDelete = testing.AllocsPerRun(10, func() {
			ok(m.ReserveWrite(keys, nil, l1Object, l1.ModeAll))
			st(m.Delete(keys, true))
		})
		// FinishWrite needs a fresh reservation each time: count single
		// calls and keep the least, which no background allocation inflates.
		c.finishWrite = math.Inf(1)
		for range 3 {
			ok(m.ReserveWrite(keys, nil, l1Object, l1.ModeAll))
			c.finishWrite = min(c.finishWrite, allocsOnce(func() { st(m.FinishWrite(keys, leases)) }))
		}
		c.read = testing.AllocsPerRun(10, func() {
			ok(m.ReserveRead(keys, 1))
			st(m.FinishRead(keys, leases, 1))
		})
		return c
	}
	const few, many = 16, 1024
	small, large := measure(few), measure(many)
	t.Logf("allocations for %d keys: %+v; for %d keys: %+v", few, small, many, large)
	if large.finishWrite != small.finishWrite {
		t.Errorf("FinishWrite allocates per key: %v times for %d keys, %v for %d", small.finishWrite, few, large.finishWrite, many)
	}
	if large.read != small.read {
		t.Errorf("ReserveRead+FinishRead allocate per key: %v times for %d keys, %v for %d", small.read, few, large.read, many)
	}
	if large.reserveDelete != small.reserveDelete {
		t.Errorf("ReserveWrite+Delete allocate per key: %v times for %d keys, %v for %d", small.reserveDelete, few, large.reserveDelete, many)
	}
}

// allocsOnce returns the number of heap allocations f makes in one call.
func allocsOnce(f func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs - before.Mallocs)
}

func mustOK(t *testing.T, res []l1.Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != l1.OK {
			t.Fatalf("key %d: %v", i, r.Status)
		}
	}
}

func mustStatus(t *testing.T, sts []l1.Status, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range sts {
		if st != l1.OK {
			t.Fatalf("key %d: %v", i, st)
		}
	}
}
