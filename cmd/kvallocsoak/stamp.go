//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
)

// stampSize is the bytes of one stamp. An object carries one at its start
// and one at its end, and nothing else is written: two pages of an 8 MiB
// object are touched.
const stampSize = 64

// model names the soak's keys.
const model = "mooncake-conversation"

// keyOf is block's key: its dense number, 8 bytes little-endian.
func keyOf(block int32) l1.ObjectKey {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], uint64(block))
	return l1.ObjectKey{ChunkHash: string(h[:]), Model: model}
}

// stampOf fills s (stampSize bytes) with block's stamp: a function of the
// block alone, so that every writer of a key writes the same bytes and
// every reader can check them; at a given end, which differs, so that a
// block's two ends do not pass for each other.
func stampOf(s []byte, block int32, end int) {
	x := uint64(uint32(block))<<1 | uint64(end)
	for i := 0; i < stampSize; i += 8 {
		// splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(s[i:], z^z>>31)
	}
}

// writeStamps writes block's stamps into obj, the object's bytes.
func writeStamps(obj []byte, block int32) {
	stampOf(obj[:stampSize], block, 0)
	stampOf(obj[len(obj)-stampSize:], block, 1)
}

// checkStamps reports whether obj carries block's stamps.
func checkStamps(obj []byte, block int32) error {
	var want [stampSize]byte
	for end, at := range []int{0, len(obj) - stampSize} {
		stampOf(want[:], block, end)
		if got := obj[at : at+stampSize]; !bytes.Equal(got, want[:]) {
			return fmt.Errorf("block %d: the stamp at byte %d of its object is %x, want %x", block, at, got[:16], want[:16])
		}
	}
	return nil
}
