package bench

import (
	"sync"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
)

// bumpArena is the floor allocator: a pointer that only moves forward, and
// wraps around when the arena is full.
type bumpArena struct {
	off, size, capacity int64
}

func (z *bumpArena) next() allocator.Block {
	if z.off+z.size > z.capacity {
		z.off = 0
	}
	blk := allocator.Block{Offset: z.off, Size: z.size}
	z.off += z.size
	return blk
}

// BenchmarkFloor holds the floors the other benchmarks are judged against.
func BenchmarkFloor(b *testing.B) {
	// bump: one bump-pointer allocation appended to a slice reused for
	// 5700 blocks, the per-block floor of a batch.
	b.Run("bump", func(b *testing.B) {
		n := batchCounts[len(batchCounts)-1]
		z := bumpArena{size: batchObject, capacity: int64(n) * batchObject}
		dst := make([]allocator.Block, 0, n)
		b.ReportAllocs()
		for b.Loop() {
			if len(dst) == cap(dst) {
				dst = dst[:0]
			}
			dst = append(dst, z.next())
		}
		sinkBlocks = dst
	})
	// mutex: a lock, a bump and an unlock, the floor of any thread-safe
	// single allocation.
	b.Run("mutex", func(b *testing.B) {
		var mu sync.Mutex
		z := bumpArena{size: 8 * MiB, capacity: 256 * MiB}
		var blk allocator.Block
		b.ReportAllocs()
		for b.Loop() {
			mu.Lock()
			blk = z.next()
			mu.Unlock()
		}
		sinkBlock = blk
	})
	// map: insert, lookup and delete of each key of a batch in a Go map,
	// the per-key floor of a keyed index.
	b.Run("map", func(b *testing.B) {
		keys := cycleKeys(mapFloorKeys, 0)
		m := make(map[cycleKey]*mapEntry, len(keys))
		e := &mapEntry{}
		b.ReportAllocs()
		for b.Loop() {
			for _, k := range keys {
				m[k] = e
			}
			for _, k := range keys {
				if m[k] == nil {
					b.Fatal("lost key")
				}
			}
			for _, k := range keys {
				delete(m, k)
			}
		}
		perUnit(b, len(keys), "ns/key")
	})
	// copy: a plain heap-to-heap copy of 32 MiB, the floor of Fill.
	b.Run("copy", func(b *testing.B) {
		src, dst := pattern(fillSize), pattern(fillSize)
		for b.Loop() {
			copy(dst, src)
		}
		bandwidth(b, fillSize)
	})
}

// mapFloorKeys is the batch of Floor/map.
const mapFloorKeys = 256

// mapEntry stands in for the manager's per-key record.
type mapEntry struct {
	blk   allocator.Block
	state int
}

// Sinks keep the floors' results alive, so the compiler cannot drop them.
var (
	sinkBlock  allocator.Block
	sinkBlocks []allocator.Block
)
