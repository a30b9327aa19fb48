package l1_test

import (
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// Reserve, write the bytes, finish, read.
func Example() {
	region, _ := hostmem.NewHeapRegion(64 << 20) // 64 MiB
	alloc, _ := allocator.New(region, allocator.Options{})
	defer alloc.Close()
	m, _ := l1.New[string](alloc, l1.Config{})
	defer m.Close()

	// Reserve: each key gets a write-locked block of at least 1 MiB.
	keys := []string{"chunk-0", "chunk-1"}
	res, err := m.ReserveWrite(keys, nil, 1<<20, l1.ModeAll)
	if err != nil {
		panic(err)
	}
	// Write the bytes, and keep each key's write lease.
	leases := make([]l1.Lease, len(keys))
	for i, r := range res {
		if r.Status == l1.OK {
			copy(alloc.Bytes(r.Block), fmt.Sprintf("KV data of %s", keys[i]))
			leases[i] = r.Lease
		}
	}
	// Finish, presenting the leases: the objects become readable.
	fmt.Println(m.FinishWrite(keys, leases))

	// Read under a read lock, then release it.
	got, _ := m.ReserveRead([]string{"chunk-1", "chunk-9"}, 1)
	fmt.Println(got[0].Status, string(alloc.Bytes(got[0].Block)[:18]))
	fmt.Println(got[1].Status)
	m.FinishRead([]string{"chunk-1"}, []l1.Lease{got[0].Lease}, 1)

	// A batch that does not fit gets its largest prefix.
	big := make([]string, 70)
	for i := range big {
		big[i] = fmt.Sprintf("big-%d", i)
	}
	res, _ = m.ReserveWrite(big, nil, 1<<20, l1.ModeAll)
	fmt.Println(res[61].Status, res[62].Status)
	// Output:
	// [OK OK] <nil>
	// OK KV data of chunk-1
	// KEY_NOT_EXIST
	// OK OUT_OF_MEMORY
}
