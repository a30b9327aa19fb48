package bench

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
)

// BenchmarkAllocate times one Allocate and one Free of an 8 MiB block on an
// empty 256 MiB pool. Compare with Floor/mutex. Besides regionKinds it runs
// over an mmap region and a fully ready segmented one (regionSegmented):
// the allocator asks a segmented region nothing per call once every segment
// is ready, so the two pairs cost the same.
func BenchmarkAllocate(b *testing.B) {
	const size, pool = 8 * MiB, 256 * MiB
	for _, kind := range append(regionKinds[:len(regionKinds):len(regionKinds)], hostmem.KindMmap, regionSegmented) {
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
	a := newPool(b, hostmem.KindHeap, 2*int64(e)*unit, unit)
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

// Production sizes: pools of 45 GiB (5700 × 8 MiB) and 1 TiB
// over MAP_NORESERVE mappings, which reserve address space without memory;
// the allocator never touches region memory, so these cost no RAM. On a
// platform without mmap, or where the kernel refuses the reservation
// (vm.overcommit_memory=2), they skip with the reason.

// poolBatch is the batch size of BenchmarkAllocatorPool: LMCache's 5700
// chunks, or as many objects as the pool holds when fewer.
const poolBatch = 5700

type namedSize struct {
	name string
	size int64
}

// poolCases are BenchmarkAllocatorPool's pools, each with its object sizes
// and operations. The 45 GiB pool runs every object size and operation;
// the 1 TiB pool the MiB-sized objects.
var poolCases = []struct {
	pool    namedSize
	objects []namedSize
	ops     []string
}{
	{namedSize{"45GiB", 5700 * 8 * MiB},
		[]namedSize{{"16KiB", 16 * KiB}, {"1MiB", MiB}, {"8MiB", 8 * MiB}, {"40MiB", 40 * MiB}},
		[]string{"batch-warm", "batch-fresh", "free", "pair"}},
	{namedSize{"1TiB", 1 << 40},
		[]namedSize{{"1MiB", MiB}, {"8MiB", 8 * MiB}, {"40MiB", 40 * MiB}},
		[]string{"batch-warm", "batch-fresh", "free"}},
}

// BenchmarkAllocatorPool times the allocator at production sizes, by pool
// and object size:
//
//   - op=batch-warm: one scattered AppendBatch of up to 5700 objects on an
//     allocator that has served the same batch before (its live-block table
//     has grown); the Free of the batch is outside the timer. Reports
//     ns/block; compare with Floor/bump.
//   - op=batch-fresh: the same batch as the first call after New; New and
//     the region's creation and Close are outside the timer. Compare with
//     batch-warm: the metadata must not cost in proportion to capacity.
//   - op=free: one Free of the whole batch, allocated contiguous (adjacent
//     blocks) outside the timer. Reports ns/block.
//   - op=pair: one Allocate and one Free of a single object. Compare with
//     Floor/bump.
//
// op=new (8 MiB objects only, the object size is irrelevant to it) times
// New alone: it must cost the same for 45 GiB as for 1 TiB.
func BenchmarkAllocatorPool(b *testing.B) {
	for _, pc := range poolCases {
		for _, obj := range pc.objects {
			n := int(min(poolBatch, pc.pool.size/obj.size))
			b.Run(fmt.Sprintf("object=%s/pool=%s", obj.name, pc.pool.name), func(b *testing.B) {
				for _, op := range pc.ops {
					b.Run("op="+op, func(b *testing.B) { benchPoolOp(b, op, pc.pool.size, obj.size, n) })
				}
				if obj.size == 8*MiB {
					b.Run("op=new", func(b *testing.B) { benchPoolOp(b, "new", pc.pool.size, obj.size, n) })
				}
			})
		}
	}
}

// noReserveRegion maps size bytes with MAP_NORESERVE, or skips.
func noReserveRegion(tb testing.TB, size int64) allocator.Region {
	tb.Helper()
	r, err := hostmem.NewMmapRegion(size, hostmem.MmapOptions{NoReserve: true})
	if err != nil {
		if errors.Is(err, hostmem.ErrUnsupported) || errors.Is(err, allocator.ErrOutOfMemory) {
			tb.Skipf("pool of %d bytes unavailable: %v", size, err)
		}
		tb.Fatal(err)
	}
	return r
}

// noReservePool returns an allocator over a NoReserve region, closed when
// the benchmark ends.
func noReservePool(tb testing.TB, size int64) *allocator.Allocator {
	tb.Helper()
	r := noReserveRegion(tb, size)
	a, err := allocator.New(r, allocator.Options{})
	if err != nil {
		r.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { a.Close() })
	return a
}

func benchPoolOp(b *testing.B, op string, pool, size int64, n int) {
	dst := make([]allocator.Block, 0, n)
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	switch op {
	case "batch-warm":
		a := noReservePool(b, pool)
		out, err := a.AppendBatch(dst[:0], size, n, allocator.Scattered)
		must(err)
		must(a.Free(out...))
		b.ReportAllocs()
		for b.Loop() {
			out, err := a.AppendBatch(dst[:0], size, n, allocator.Scattered)
			b.StopTimer()
			must(err)
			must(a.Free(out...))
			b.StartTimer()
		}
		perUnit(b, n, "ns/block")
	case "batch-fresh", "new":
		noReserveRegion(b, pool).Close() // skip early when unavailable
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			r := noReserveRegion(b, pool)
			if op == "new" {
				b.StartTimer()
			}
			a, err := allocator.New(r, allocator.Options{})
			must(err)
			if op == "batch-fresh" {
				b.StartTimer()
				_, err = a.AppendBatch(dst[:0], size, n, allocator.Scattered)
				must(err)
			}
			b.StopTimer()
			must(a.Close())
			b.StartTimer()
		}
		if op == "batch-fresh" {
			perUnit(b, n, "ns/block")
		}
	case "free":
		a := noReservePool(b, pool)
		out, err := a.AppendBatch(dst[:0], size, n, allocator.Contiguous) // warm: see TestAllocsPerOpIndependentOfN
		must(err)
		must(a.Free(out...))
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			out, err := a.AppendBatch(dst[:0], size, n, allocator.Contiguous)
			must(err)
			b.StartTimer()
			must(a.Free(out...))
		}
		perUnit(b, n, "ns/block")
	case "pair":
		a := noReservePool(b, pool)
		b.ReportAllocs()
		for b.Loop() {
			blk, err := a.Allocate(size)
			must(err)
			must(a.Free(blk))
		}
	default:
		b.Fatalf("unknown op %q", op)
	}
}
