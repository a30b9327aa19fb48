//go:build linux

package node_test

import (
	"encoding/binary"

	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/l1"
)

// Broken variants of the replay, one per check of checks_test.go: each
// check must fail against its variant. They live beside the replay they
// break, so that imports flow downward: the reference models and mutants
// under internal/reference depend on nothing in bench.
var (
	// keysCarryRank names each rank's copy of a block with the rank's
	// own KVRank, as a connector that keys KV by rank whatever the model
	// does: for an MLA model, whose ranks hold the same KV, every rank then
	// writes its own copy and the shared pool deduplicates nothing.
	keysCarryRank = node.Variant{Key: func(b int32, rank int) l1.ObjectKey {
		k := node.Key(b, rank)
		k.KVRank = uint32(rank)
		return k
	}}

	// keysCollide keeps only the low byte of the block number in the
	// key's chunk hash, as a connector that truncates its hashes: distinct
	// blocks share keys, and a reader finds another block's bytes.
	keysCollide = node.Variant{Key: func(b int32, rank int) l1.ObjectKey {
		k := node.Key(b, rank)
		var h [8]byte
		binary.LittleEndian.PutUint64(h[:], uint64(b&0xff))
		k.ChunkHash = string(h[:])
		return k
	}}

	// privatePoolsOfP gives each private pool the whole node pool P
	// instead of P/8, as a router that sizes every engine's pool from the
	// node's budget: the private pools get 8 times the memory of the
	// shared one they are compared with.
	privatePoolsOfP = node.Variant{Slots: func(ps node.Pools, p int64) []int64 {
		if ps == node.Private {
			ps = node.Replicated
		}
		return ps.Slots(p)
	}}

	// dropsPositions stores without chain positions, as a client that
	// calls ReserveWrite where the policy needs ReserveWriteChain: the
	// partial hint of a request's last block is lost, so the daemon's
	// eviction order is not the in-process engine's.
	dropsPositions = node.Variant{Positions: func([]uint32) []uint32 { return nil }}
)

// routeByMapOrder routes by conversation, placing each new
// conversation on the least-loaded engine with ties broken by ranging
// over a Go map, whose order is random: the router is not deterministic,
// so neither is the replay.
var routeByMapOrder = node.Routing{Name: "session (map order)", Phrase: "by conversation, ties by map order", Assign: func(reqs []trace.Request, engines int) ([]uint8, error) {
	sess, n, err := node.Sessions(reqs, node.MinShared)
	if err != nil {
		return nil, err
	}
	load := make(map[int]int, engines)
	for e := range engines {
		load[e] = 0
	}
	of := make([]int, n)
	for i := range of {
		of[i] = -1
	}
	out := make([]uint8, len(reqs))
	for i, s := range sess {
		if of[s] < 0 {
			best := -1
			for e, l := range load {
				if best < 0 || l < load[best] {
					best = e
				}
			}
			of[s] = best
		}
		load[of[s]]++
		out[i] = uint8(of[s])
	}
	return out, nil
}}
