package l1_test

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// A serving engine's request under the prefix-aware policy: the cached
// prefix is read-locked, the missing blocks are written with their chain
// positions, then both are released. Eviction then takes the chain from
// its tail, so the blocks that stay are still a usable prefix.
func ExampleManager_ReserveWriteChain() {
	region, _ := hostmem.NewHeapRegion(8 << 20)
	alloc, _ := allocator.New(region, allocator.Options{})
	defer alloc.Close()
	m, _ := l1.New[string](alloc, l1.Config{Eviction: l1.EvictPrefix, EvictOnDemand: true})
	defer m.Close()
	var evicted []string
	m.AddListenerFunc(func(e l1.Event[string]) {
		if e.Kind == l1.EventRemoved && e.Cause == l1.CauseEvicted {
			evicted = append(evicted, e.Keys...)
		}
	})
	store := func(keys []string, first uint32) {
		pos := make([]uint32, len(keys))
		for i := range pos {
			pos[i] = first + uint32(i)
		}
		res, _ := m.ReserveWriteChain(keys, pos, nil, 1<<20, l1.ModeNew)
		leases := make([]l1.Lease, len(keys))
		for i, r := range res {
			leases[i] = r.Lease
		}
		m.FinishWrite(keys, leases)
	}
	// Turn 1 stores a chain of four 1 MiB blocks.
	store([]string{"a0", "a1", "a2", "a3"}, 0)
	// Turn 2 reads it and stores two more.
	hits, _ := m.ReserveRead([]string{"a0", "a1", "a2", "a3"}, 1)
	store([]string{"a4", "a5"}, 4)
	leases := make([]l1.Lease, len(hits))
	for i, r := range hits {
		leases[i] = r.Lease
	}
	m.FinishRead([]string{"a0", "a1", "a2", "a3"}, leases, 1)
	// Another request needs 5 of the 8 MiB: the chain goes tail first.
	store([]string{"b0", "b1", "b2", "b3", "b4"}, 0)
	fmt.Println(evicted)
	// Output:
	// [a5 a4 a3]
}
