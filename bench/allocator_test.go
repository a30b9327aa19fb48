package bench

import (
	"fmt"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
)

// BenchmarkAllocate times one Allocate and one Free of an 8 MiB block on an
// empty 256 MiB pool. Compare with Floor/mutex.
func BenchmarkAllocate(b *testing.B) {
	const size, pool = 8 * MiB, 256 * MiB
	for _, kind := range regionKinds {
		b.Run("region="+kind, func(b *testing.B) {
			a := newPool(b, kind, pool, 0)
			blk, err := a.Allocate(size) // warm: see TestAllocsPerOpIndependentOfN
			if err == nil {
				err = a.Free(blk)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				blk, err := a.Allocate(size)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.Free(blk); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// batchObject is the object size of BenchmarkAllocateBatch. The allocator
// never touches the memory, so its cost per block does not depend on the
// size; 64 KiB keeps a 5700-object pool at 357 MiB, small enough to pin.
const batchObject = 64 * KiB

// batchCounts are the batch sizes of BenchmarkAllocateBatch: a small
// request and LMCache's 5700-chunk one.
var batchCounts = []int{256, 5700}

// BenchmarkAllocateBatch times one batch of n 64 KiB objects and one Free of
// the whole batch, on a pool with room for the batch and 1/16 more. The
// batch goes through AppendBatch with a reused slice: this measures the
// allocator, not the Go heap. Reports ns/block; compare with Floor/bump.
func BenchmarkAllocateBatch(b *testing.B) {
	for _, kind := range regionKinds {
		b.Run("region="+kind, func(b *testing.B) {
			for _, p := range allocator.Placements {
				b.Run("placement="+p.String(), func(b *testing.B) {
					for _, n := range batchCounts {
						b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
							benchBatch(b, kind, p, n)
						})
					}
				})
			}
		})
	}
}

func benchBatch(b *testing.B, kind string, p allocator.Placement, n int) {
	pool := int64(n) * batchObject
	a := newPool(b, kind, pool+pool/16, 0)
	dst := make([]allocator.Block, 0, n)
	op := func() {
		out, err := a.AppendBatch(dst[:0], batchObject, n, p)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Free(out...); err != nil {
			b.Fatal(err)
		}
	}
	op() // warm: see TestAllocsPerOpIndependentOfN
	b.ReportAllocs()
	for b.Loop() {
		op()
	}
	perUnit(b, n, "ns/block")
}

// fragmentedExtents are the free-extent counts of BenchmarkFragmented.
var fragmentedExtents = []int{1_000, 100_000}

// fragmentedBatch is the batch size of BenchmarkFragmented's op=batch.
const fragmentedBatch = 16

// BenchmarkFragmented times allocation on a pool of E equal free extents:
// 2E one-unit blocks (64-byte alignment, so 1e5 extents need 12.8 MB of
// heap), every other one freed. op=single is one Allocate and Free, which
// best fit serves from the lowest hole; op=batch is a scattered batch of 16
// objects, each from its own hole, and their Free. Each op leaves the pool
// as it found it. Compare extents=100000 with extents=1000: the index is
// O(log F), so the ratio should stay near 1.
func BenchmarkFragmented(b *testing.B) {
	const unit = 64
	for _, e := range fragmentedExtents {
		b.Run(fmt.Sprintf("extents=%d", e), func(b *testing.B) {
			a := fragmentedPool(b, e, unit)
			b.Run("op=single", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					blk, err := a.Allocate(unit)
					if err != nil {
						b.Fatal(err)
					}
					if err := a.Free(blk); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("op=batch", func(b *testing.B) {
				dst := make([]allocator.Block, 0, fragmentedBatch)
				op := func() {
					out, err := a.AppendBatch(dst[:0], unit, fragmentedBatch, allocator.Scattered)
					if err != nil {
						b.Fatal(err)
					}
					if err := a.Free(out...); err != nil {
						b.Fatal(err)
					}
				}
				op() // warm: see TestAllocsPerOpIndependentOfN
				b.ReportAllocs()
				for b.Loop() {
					op()
				}
			})
		})
	}
}

// fragmentedPool returns a pool of 2e units of the given size with every
// other unit free: e free extents of one unit each.
func fragmentedPool(b *testing.B, e int, unit int64) *allocator.Allocator {
	a := newPool(b, allocator.KindHeap, 2*int64(e)*unit, unit)
	bs, err := a.AllocateBatch(unit, 2*e, allocator.Contiguous)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(bs); i += 2 {
		if err := a.Free(bs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if got := a.Stats().FreeExtents; got != e {
		b.Fatalf("fragmented pool has %d free extents, want %d", got, e)
	}
	return a
}

// fillSize is the object BenchmarkFill writes.
const fillSize = 32 * MiB

// BenchmarkFill times copying a 32 MiB object from the Go heap into its
// block, the write every stored KV chunk costs. Reports GB/s; compare with
// Floor/copy.
func BenchmarkFill(b *testing.B) {
	for _, kind := range regionKinds {
		b.Run("region="+kind, func(b *testing.B) {
			a := newPool(b, kind, 2*fillSize, 0)
			blk, err := a.Allocate(fillSize)
			if err != nil {
				b.Fatal(err)
			}
			dst, src := a.Bytes(blk), pattern(fillSize)
			copy(dst, src) // fault the block in before timing
			b.ResetTimer()
			for b.Loop() {
				copy(dst, src)
			}
			bandwidth(b, fillSize)
		})
	}
}

// pattern returns n touched bytes that are not all zero.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>12)
	}
	return p
}
