package allocator_test

import (
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// A pool of 64 MiB on the Go heap, carved into 1 MiB objects. In production
// the region is a NewMmapRegion of tens of GiB or a NewCUDAHostRegion; the
// calls are the same.
func Example() {
	r, err := hostmem.NewHeapRegion(64 << 20)
	if err != nil {
		panic(err)
	}
	a, err := allocator.New(r, allocator.Options{Align: 4096}) // a owns r
	if err != nil {
		panic(err)
	}
	defer a.Close() // releases r

	const object = 1 << 20
	// All or nothing: 16 objects, one contiguous run when a free extent holds it.
	batch, err := a.AllocateBatch(object, 16, allocator.ContiguousFirst)
	if err != nil {
		panic(err)
	}
	// The largest prefix that fits: 100 asked, 48 granted, in one pass.
	got, err := a.AllocateUpTo(object, 100, allocator.Scattered)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(batch), len(got), a.Fit(object, 100))

	// Blocks are offsets into the region; Bytes is the memory behind one.
	copy(a.Bytes(got[0]), "KV chunk")
	fmt.Println(string(a.Bytes(got[0])[:8]))

	// A batch that does not fit changes nothing.
	_, err = a.AllocateBatch(object, 1, allocator.Contiguous)
	fmt.Println(errors.Is(err, allocator.ErrOutOfMemory))

	// Free validates every block first: a bad block frees nothing.
	err = a.Free(append(got[:2:2], allocator.Block{Offset: 1, Size: object})...)
	fmt.Println(errors.Is(err, allocator.ErrInvalidBlock), a.Stats().Used>>20)
	if err := a.Free(append(batch, got...)...); err != nil {
		panic(err)
	}
	st := a.Stats()
	fmt.Println(st.Used, st.Free>>20, st.FreeExtents)
	// Output:
	// 16 48 0
	// KV chunk
	// true
	// true 64
	// 0 64 1
}
