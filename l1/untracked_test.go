package l1_test

import (
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// TestReserveReadUntracked: a read lock of ReserveReadUntracked, released
// with FinishReadUntracked, is a lock like any (the object is not
// evictable meanwhile, its lease is the read epoch's), but records no use:
// a chain's partial last block stays the next victim, where a ReserveRead
// and FinishRead make it a used block and another goes; no lookup is
// counted.
func TestReserveReadUntracked(t *testing.T) {
	for _, policy := range []l1.EvictionPolicy{l1.EvictLRU, l1.EvictPrefix} {
		for _, untracked := range []bool{true, false} {
			r, err := hostmem.NewHeapRegion(4 * 64)
			if err != nil {
				t.Fatal(err)
			}
			a, err := allocator.New(r, allocator.Options{Align: 64})
			if err != nil {
				t.Fatal(err)
			}
			m, err := l1.New[int](a, l1.Config{Placement: allocator.Scattered, EvictOnDemand: true, Eviction: policy})
			if err != nil {
				t.Fatal(err)
			}
			ks := []int{0, 1, 2, 3}
			res, err := m.ReserveWriteChain(ks, []uint32{0, 1, 2, 3 | l1.Partial}, nil, 64, l1.ModeAll)
			if err != nil {
				t.Fatal(err)
			}
			leases := make([]l1.Lease, len(res))
			for i, x := range res {
				leases[i] = x.Lease
			}
			if _, err := m.FinishWrite(ks, leases); err != nil {
				t.Fatal(err)
			}
			calls := m.Stats().Lookups[l1.LookupRead].Calls
			read, release := m.ReserveRead, m.FinishRead
			if untracked {
				read, release = m.ReserveReadUntracked, m.FinishReadUntracked
			}
			rr, err := read(ks[3:], 1)
			if err != nil || rr[0].Status != l1.OK {
				t.Fatalf("read: %v, %v", rr, err)
			}
			if st, _ := m.State(3); st.ReadLocks != 1 || st.ReadLease != rr[0].Lease || m.IsEvictable(3) {
				t.Fatalf("%v untracked %v: locked %+v, evictable %v", policy, untracked, st, m.IsEvictable(3))
			}
			if sts, err := release(ks[3:], []l1.Lease{rr[0].Lease}, 1); err != nil || sts[0] != l1.OK {
				t.Fatalf("release: %v, %v", sts, err)
			}
			if got := m.Stats().Lookups[l1.LookupRead].Calls - calls; got != map[bool]uint64{true: 0, false: 1}[untracked] {
				t.Fatalf("%v untracked %v: %d lookups counted", policy, untracked, got)
			}
			if res, err := m.ReserveWrite([]int{10}, nil, 64, l1.ModeAll); err != nil || res[0].Status != l1.OK {
				t.Fatalf("reserve into a full pool: %v, %v", res, err)
			}
			if _, kept := m.State(3); kept == untracked {
				t.Errorf("%v, untracked %v: the partial block kept %v", policy, untracked, kept)
			}
			m.Close()
			a.Close()
		}
	}
}
