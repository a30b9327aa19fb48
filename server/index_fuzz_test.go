//go:build linux

package server

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// testObjects is n objects of every kind an index carries: partial and
// whole, temporary, S3-FIFO small and main, use counts. It lives beside
// the fuzz target, which must build without the other test files.
func testObjects(n int) []l1.Saved[l1.ObjectKey] {
	out := make([]l1.Saved[l1.ObjectKey], n)
	for i := range out {
		out[i] = l1.Saved[l1.ObjectKey]{
			Key:   l1.ObjectKey{ChunkHash: fmt.Sprintf("chunk-%d", i), Model: "m", KVRank: uint32(i % 8), GroupID: 1, CacheSalt: "s"},
			Block: allocator.Block{Offset: int64(i) * 8192, Size: 8192, Gen: uint64(i + 1)},
			Size:  8000, Pos: uint32(i) | l1.Partial*uint32(i%2), Temporary: i%3 == 0, Small: i%2 == 0, Freq: uint8(i % 4),
		}
	}
	return out
}

// testHeld is n held blocks past testObjects(n)'s.
func testHeld(n int) []heldBlock {
	out := make([]heldBlock, n)
	for i := range out {
		out[i] = heldBlock{block: allocator.Block{Offset: int64(n+i) * 8192, Size: 8192, Gen: uint64(n + i + 1)}, read: i%2 == 1, lapse: int64(1e12 + i)}
	}
	return out
}

// testLapses is read lapses for n objects: every other one read-locked.
func testLapses(n int) []int64 {
	out := make([]int64, n)
	for i := 0; i < n; i += 2 {
		out[i] = int64(2e12 + i)
	}
	return out
}

// FuzzIndexDecode: decodeIndex never panics on any bytes, and whatever it
// accepts is canonical: encoding what it decoded gives back the very
// bytes (so no two indexes decode alike, and nothing it accepts was
// ignored). Its seeds run with the package's tests; go test -fuzz
// FuzzIndexDecode ./server/ explores further.
func FuzzIndexDecode(f *testing.F) {
	id := poolIdentity{bytes: 1 << 20, align: 4096, dev: 7, ino: 99}
	for _, n := range []int{0, 1, 3} {
		b := encodeIndex(nil, id, l1.EvictS3FIFO, 5, testObjects(n), testLapses(n), testHeld(n))
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	check := func(t *testing.T, b []byte) {
		x, err := decodeIndex(b, id)
		if err != nil {
			return
		}
		again := encodeIndex(nil, x.id, x.policy, x.epoch, x.objects, x.readLapse, x.held)
		if !bytes.Equal(again, b) {
			t.Fatalf("decoded %d objects from %d bytes that re-encode to %d other bytes", len(x.objects), len(b), len(again))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		// The same bytes with a CRC that matches, so that the fuzzer gets
		// past the checksum to the lengths behind it.
		if len(b) >= 4 {
			body := b[:len(b)-4]
			check(t, binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, castagnoli)))
		}
	})
}
