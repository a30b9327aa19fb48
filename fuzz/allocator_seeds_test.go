package fuzz

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
)

// Builders for FuzzAllocator records. Sizes are in bytes.

func encSize(size int64) uint16 {
	switch {
	case size >= 1 && size <= 16*fzAlign:
		return uint16(size - 1)
	case size >= 1 && size <= fzCapacity:
		return 0x8000 | uint16(size-1)
	}
	panic("encSize: use edgeSize")
}

// edgeSize encodes edge case kind (0: zero, 1: negative, 2: above the
// capacity, 3: near MaxInt64) with variation v.
func edgeSize(kind, v uint16) uint16 { return 0xc000 | (v<<2|kind)&0x3fff }

func rAlloc(size int64) allocRecord { return allocRecord{Op: uint8(kAllocate), Size: encSize(size)} }
func rBatch(size int64, n int, p allocator.Placement) allocRecord {
	return allocRecord{Op: uint8(kBatch), Size: encSize(size), N: uint8(n), Place: uint8(p)}
}
func rUpTo(size int64, n int, p allocator.Placement) allocRecord {
	return allocRecord{Op: uint8(kUpTo), Size: encSize(size), N: uint8(n), Place: uint8(p)}
}
func rFit(size int64, n int) allocRecord {
	return allocRecord{Op: uint8(kFit), Size: encSize(size), N: uint8(n)}
}

// rFree frees count live blocks from live[idx] on, with a corruption
// (0 for none).
func rFree(idx, count, corruption int) allocRecord {
	return allocRecord{Op: uint8(kFree), Idx: uint16(idx), Mod: uint8(count-1) | uint8(corruption)<<3}
}
func rFreeAll(idx int) allocRecord { return allocRecord{Op: uint8(kFreeAll), Idx: uint16(idx)} }

// rReissue is rFree run as Reissue.
func rReissue(idx, count, corruption int) allocRecord {
	r := rFree(idx, count, corruption)
	r.Place = 0x80
	return r
}

const (
	cf = allocator.ContiguousFirst
	sc = allocator.Scattered
	co = allocator.Contiguous
)

// fragmentEveryOther fills the pool with 64 objects of 4 units and frees
// every other one: 32 one-object holes, nothing larger.
func fragmentEveryOther() []allocRecord {
	ops := []allocRecord{rBatch(256, 32, co), rBatch(256, 32, co)}
	for i := range 32 {
		ops = append(ops, rFree(i, 1, 0)) // live[i] is the object 2i by now
	}
	return ops
}

func init() {
	seedSets["FuzzAllocatorLarge"] = largeSeeds()
	frag := fragmentEveryOther()
	seedSets["FuzzAllocator"] = []seed{
		{"basic", encodeAllocOps([]allocRecord{
			rAlloc(1), rAlloc(65), rAlloc(4096),
			rBatch(100, 5, cf), rBatch(100, 5, sc), rBatch(100, 5, co),
			rUpTo(1024, 40, sc), rFit(64, 10), rFit(1024, 10),
			rFree(0, 1, 0), rFree(3, 4, 0), rAlloc(200), rFreeAll(2),
		})},
		{"coalesce", encodeAllocOps([]allocRecord{
			rBatch(128, 8, co), rFree(1, 1, 0), rFree(1, 1, 0), // blocks 1 and 2 merge
			rFree(4, 1, 0), rFree(3, 1, 0), // blocks 6 and 5: merge with each other and the tail
			rAlloc(256), rFree(0, 3, 0), rFreeAll(0),
		})},
		{"fragment-every-other", encodeAllocOps(append(slices.Clone(frag),
			rFit(256, 47), rFit(512, 10), rFit(64, 47),
			rBatch(256, 2, co), rBatch(256, 2, cf), rBatch(256, 40, sc), rBatch(256, 40, cf),
			rAlloc(512),
			rUpTo(256, 47, co), rUpTo(256, 47, cf), rFree(0, 8, 0), rUpTo(256, 3, sc),
			rFreeAll(5),
		))},
		{"upto-every-placement", encodeAllocOps(append(slices.Clone(frag),
			rFree(31, 1, 0), rFree(30, 1, 0), // holes joined: runs of 3 and 2 objects
			rUpTo(256, 10, co), rUpTo(256, 10, cf), rUpTo(256, 47, sc), rUpTo(64, 5, sc),
		))},
		{"bad-frees", encodeAllocOps([]allocRecord{
			rBatch(192, 10, sc), rFree(2, 1, 0),
			rFree(0, 3, cRepeat), rFree(1, 2, cSizeUp), rFree(1, 2, cSizeDown), rFree(4, 1, cMisaligned),
			rFree(0, 1, cStale), rFree(0, 1, cForeign), rFree(0, 1, cOutOfRange),
			rFree(0, 1, cNonPositive), rFree(1, 1, cNonPositive), rFree(0, 8, cRepeat),
			rFree(5, 1, cForeign), rFree(3, 2, 0), rFree(1, 1, cStale),
		})},
		{"bad-args", encodeAllocOps(badArgs())},
		// A stale handle: A is freed and its offset and size handed out
		// again (A'); freeing A, alone or after B, must fail and leave A'
		// live.
		{"stale-handle", encodeAllocOps([]allocRecord{
			rAlloc(256), rAlloc(256), rFree(0, 1, 0), rAlloc(256), // live: B, A'
			rFree(0, 1, cStale), rFree(1, 1, cStale), rBatch(256, 3, co), rFree(1, 3, 0),
			rAlloc(256), rFree(3, 1, cStale), rFreeAll(0),
		})},
		// Reissue: blocks handed to new owners in place. The old handles
		// are then stale to Free and to Reissue, alone or after live
		// blocks; a repeat and a size off by one are rejected; the new
		// handles free and reissue again, and everything coalesces.
		{"reissue", encodeAllocOps([]allocRecord{
			rBatch(256, 6, co), rReissue(1, 3, 0), // live: A, E, F, B', C', D'
			rFree(0, 1, cStale), rReissue(0, 1, cStale), rReissue(1, 2, cRepeat),
			rReissue(3, 2, cSizeUp), rReissue(3, 3, 0), rFree(2, 2, 0), rFreeAll(0),
		})},
		{"exhaust", encodeAllocOps([]allocRecord{
			rAlloc(fzCapacity / 2), rAlloc(fzCapacity / 2), rAlloc(1), rBatch(64, 1, cf), rUpTo(64, 5, cf),
			rFit(64, 1), rFree(0, 1, 0), rAlloc(fzCapacity/2 + 1), rUpTo(fzCapacity/4, 47, co),
			rFree(0, 1, 0), rBatch(fzCapacity/4, 3, sc), rFreeAll(0), rBatch(fzCapacity, 1, co),
		})},
	}
}

// largeSeeds are FuzzAllocatorLarge's seeds. The records decode at
// production scale (see geometry): rAlloc(1) is a 1 MiB object and
// rBatch(x, n, p) a batch of 128n objects, so these fill the 44.5 GiB pool
// with 8 MiB objects, fragment it, hit exhaustion and replay stale handles.
func largeSeeds() []seed {
	mib8 := allocRecord{Size: 7}                                               // exactly 8 MiB
	odd8 := allocRecord{Size: 0x4000 | 7}                                      // just under 8 MiB
	batch := func(r allocRecord, n uint8, p allocator.Placement) allocRecord { // 128n objects
		r.Op, r.N, r.Place = uint8(kBatch), n, uint8(p)
		return r
	}
	upTo := func(r allocRecord, n uint8, p allocator.Placement) allocRecord {
		r.Op, r.N, r.Place = uint8(kUpTo), n, uint8(p)
		return r
	}
	fit := func(r allocRecord, n uint8) allocRecord { r.Op, r.N = uint8(kFit), n; return r }
	alloc := func(r allocRecord) allocRecord { r.Op = uint8(kAllocate); return r }
	return []seed{
		{"fill-5700x8MiB", encodeAllocOps([]allocRecord{
			batch(mib8, 44, sc), batch(mib8, 1, cf), fit(mib8, 47), upTo(mib8, 47, sc), // 5632 + 68
			alloc(mib8), rFree(0, 8, 0), rFree(100, 8, cStale), rFree(5000, 8, 0), alloc(mib8),
			rFree(3, 1, cStale), upTo(odd8, 47, sc), rFreeAll(17),
		})},
		{"fragment-8MiB", encodeAllocOps([]allocRecord{
			batch(mib8, 40, co), rFree(0, 8, 0), rFree(16, 8, 0), rFree(32, 8, 0), rFree(48, 8, 0),
			batch(odd8, 1, sc), fit(mib8, 47), upTo(mib8, 47, co), batch(mib8, 10, co),
			alloc(mib8), rFree(7, 3, cRepeat), rFree(9, 2, cSizeUp), rFree(11, 1, cMisaligned),
			rFree(2, 1, cStale), rFree(1, 1, cStale), rFreeAll(3),
		})},
	}
}

// badArgs exercises every rejected argument of every call.
func badArgs() []allocRecord {
	var ops []allocRecord
	for kind := range uint16(4) {
		ops = append(ops, allocRecord{Op: uint8(kAllocate), Size: edgeSize(kind, 3)})
		for _, k := range []allocKind{kBatch, kUpTo, kFit} {
			ops = append(ops, allocRecord{Op: uint8(k), Size: edgeSize(kind, 1), N: 3})
		}
	}
	for _, n := range []uint8{0xf0, 0xf7, 0xf8, 0xfc} { // negative, negative, overflow, huge
		for _, k := range []allocKind{kBatch, kUpTo, kFit} {
			ops = append(ops, allocRecord{Op: uint8(k), Size: encSize(4096), N: n, Place: uint8(sc)})
		}
	}
	for _, k := range []allocKind{kBatch, kUpTo} {
		ops = append(ops, allocRecord{Op: uint8(k), Size: encSize(64), N: 1, Place: 0xf0},
			allocRecord{Op: uint8(k), Size: encSize(64), N: 0, Place: 0xff},
			allocRecord{Op: uint8(k), Size: encSize(64), N: 0, Place: uint8(co)})
	}
	return append(ops, rFit(64, 0), rAlloc(fzCapacity), rFreeAll(0))
}

// TestEncodeDecodeAllocator round-trips encodeAllocOps, and checks that
// trailing bytes shorter than a record are ignored.
func TestEncodeDecodeAllocator(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100 {
		ops := make([]allocRecord, rng.IntN(20))
		for i := range ops {
			ops[i] = allocRecord{
				Op: uint8(rng.Uint32()), Place: uint8(rng.Uint32()), N: uint8(rng.Uint32()), Mod: uint8(rng.Uint32()),
				Size: uint16(rng.Uint32()), Idx: uint16(rng.Uint32()),
			}
		}
		data := encodeAllocOps(ops)
		if len(data) != len(ops)*allocRecordSize {
			t.Fatalf("encoded %d records into %d bytes", len(ops), len(data))
		}
		if got := decodeAllocOps(data); !slices.Equal(got, ops) {
			t.Fatalf("round trip: got %v, want %v", got, ops)
		}
		tail := append(bytes.Clone(data), 1, 2, 3)
		if got := decodeAllocOps(tail); !slices.Equal(got, ops) {
			t.Fatalf("trailing bytes changed the decoding: %v", got)
		}
	}
	// The builders decode to what they say.
	if r := rBatch(300, 7, co); r.kind() != kBatch || r.size() != 300 || r.n() != 7 || r.placement() != co {
		t.Fatalf("rBatch decodes to %v", r)
	}
	if r := rAlloc(fzCapacity); r.size() != fzCapacity {
		t.Fatalf("rAlloc(capacity) decodes to %v", r)
	}
	if r := rFree(5, 3, cStale); r.kind() != kFree || r.Idx != 5 || r.freeCount() != 3 || r.corruption() != cStale {
		t.Fatalf("rFree decodes to %v", r)
	}
	for kind, check := range map[uint16]func(int64) bool{
		0: func(s int64) bool { return s == 0 },
		1: func(s int64) bool { return s < 0 },
		2: func(s int64) bool { return s > fzCapacity },
		3: func(s int64) bool { return s > 1<<62 },
	} {
		if s := (allocRecord{Size: edgeSize(kind, 5)}).size(); !check(s) {
			t.Fatalf("edge size %d decodes to %d", kind, s)
		}
	}
}
