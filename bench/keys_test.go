package bench

import (
	"encoding/binary"

	"github.com/kvalloc/kvalloc/l1"
)

// cycleKey is the key of the L1 benchmarks and of Floor/map: LMCache's
// object key, so the floor hashes what the manager hashes.
type cycleKey = l1.ObjectKey

// cycleKeys returns n distinct keys, disjoint for distinct seeds: a 32-byte
// chunk hash, a model name, a rank and a group, as a KV cache has them.
func cycleKeys(n int, seed uint64) []cycleKey {
	ks := make([]cycleKey, n)
	var h [32]byte
	for i := range ks {
		x := seed<<32 | uint64(i)
		for j := 0; j < 4; j++ {
			x ^= x >> 33
			x *= 0xff51afd7ed558ccd
			x ^= x >> 29
			binary.LittleEndian.PutUint64(h[8*j:], x)
		}
		ks[i] = cycleKey{ChunkHash: string(h[:]), Model: "llama-3.1-70b", KVRank: uint32(seed), GroupID: 0}
	}
	return ks
}
