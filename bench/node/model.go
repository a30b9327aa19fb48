//go:build linux

package node

import (
	"encoding/binary"

	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/l1"
)

// The node and its model: production sizes.
const (
	// Engines is the engine processes (data parallelism) or the ranks of
	// one engine (tensor parallelism) on the node: one per GPU of an
	// 8-GPU node.
	Engines = 8

	// BlockTokens is the tokens per block, the Mooncake trace's 512.
	BlockTokens = trace.DefaultBlockTokens

	// Layers, LatentDim, RopeDim and ValueBytes are the KV shape of Kimi
	// K2, the current model of the serving system the trace was sampled
	// from (DeepSeek-V3's architecture): 61 layers of multi-head latent
	// attention, each caching per token a compressed latent of
	// kv_lora_rank 512 and a decoupled RoPE key of qk_rope_head_dim 64, in
	// bf16. MLA caches one latent per token, not one per KV head, so every
	// TP rank holds the same KV: the case where a shared pool saves 7/8.
	Layers     = 61
	LatentDim  = 512
	RopeDim    = 64
	ValueBytes = 2

	// TokenBytes is 61 × (512 + 64) × 2 = 70,272 bytes of KV per token.
	TokenBytes = Layers * (LatentDim + RopeDim) * ValueBytes
	// BlockBytes is one 512-token block: 512 × 70,272 = 35,979,264 bytes
	// (34.31 MiB), a multiple of 4 KiB, so the allocator's blocks are
	// exactly this size. The whole trace's 182,790 distinct blocks would be
	// 6.0 TiB; its pools of 0.1, 0.25 and 0.5 of them are 613 GiB, 1.5 TiB
	// and 3.0 TiB, the first two a node's host memory. The pools are
	// memfds backed only where written, and the replay writes a stamp at
	// the end of each object (StampBytes), so a pool costs one page per
	// block it ever held, not its size.
	BlockBytes = BlockTokens * TokenBytes

	// Model is the keys' model name.
	Model = "kimi-k2"

	// StampBytes is the stamp at the end of every object: the block's
	// number and a check word. A reader checks it on every hit.
	StampBytes = 16
)

// stampMagic makes a stamp's check word differ from its block number.
const stampMagic = 0x6b76616c6c6f6321 // "kvalloc!"

// Key names block b of the trace as rank rank stores it: MLA's KV is the
// same on every rank, so the key is the block's alone (KVRank 0), and the
// ranks of one engine share it.
func Key(b int32, rank int) l1.ObjectKey {
	var h [8]byte
	binary.LittleEndian.PutUint64(h[:], uint64(b))
	return l1.ObjectKey{ChunkHash: string(h[:]), Model: Model}
}

// blockOf returns the block a key of Key's layout names: its chunk hash's
// first 8 bytes.
func blockOf(k l1.ObjectKey) (int, bool) {
	if len(k.ChunkHash) < 8 {
		return 0, false
	}
	b := binary.LittleEndian.Uint64([]byte(k.ChunkHash[:8]))
	return int(b), b < 1<<31
}

// stamp writes block b's stamp at the end of obj.
func stamp(obj []byte, b int32) {
	end := obj[len(obj)-StampBytes:]
	binary.LittleEndian.PutUint64(end, uint64(b))
	binary.LittleEndian.PutUint64(end[8:], uint64(b)^stampMagic)
}

// stamped reports whether obj ends with block b's stamp, and returns the
// block number it names.
func stamped(obj []byte, b int32) (int64, bool) {
	end := obj[len(obj)-StampBytes:]
	got := binary.LittleEndian.Uint64(end)
	return int64(got), got == uint64(b) && binary.LittleEndian.Uint64(end[8:]) == uint64(b)^stampMagic
}
