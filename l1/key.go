package l1

import "fmt"

// ObjectKey names one KV chunk, as LMCache's ObjectKey does. Manager is
// generic in its key type, so any comparable type works (tests use ints);
// ObjectKey is the natural one for a KV cache.
type ObjectKey struct {
	// ChunkHash is the chunk's hash, as raw bytes in a string.
	ChunkHash string
	// Model names the model the KV data belongs to.
	Model string
	// KVRank is the rank of the worker that produced the data.
	KVRank uint32
	// GroupID is LMCache's object_group_id (a layer group).
	GroupID uint32
	// CacheSalt separates caches that must not share entries.
	CacheSalt string
}

// String renders the key for logs: model, rank, group, hash in hex, salt.
func (k ObjectKey) String() string {
	s := fmt.Sprintf("%s/r%d/g%d/%x", k.Model, k.KVRank, k.GroupID, k.ChunkHash)
	if k.CacheSalt != "" {
		s += "/" + k.CacheSalt
	}
	return s
}
