//go:build linux

package server

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

// FuzzIndexDecode: decodeIndex never panics on any bytes, and whatever it
// accepts is canonical: encoding what it decoded gives back the very
// bytes (so no two indexes decode alike, and nothing it accepts was
// ignored). Its seeds run with the package's tests; go test -fuzz
// FuzzIndexDecode ./server/ explores further.
func FuzzIndexDecode(f *testing.F) {
	id := poolIdentity{bytes: 1 << 20, align: 4096, dev: 7, ino: 99}
	for _, n := range []int{0, 1, 3} {
		b := encodeIndex(nil, id, l1.EvictS3FIFO, 5, testObjects(n))
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	check := func(t *testing.T, b []byte) {
		x, err := decodeIndex(b, id)
		if err != nil {
			return
		}
		again := encodeIndex(nil, x.id, x.policy, x.epoch, x.objects)
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
