package l2

import (
	"context"

	"github.com/kvalloc/kvalloc/l1"
)

// Store is an L2 tier as the daemon uses it. Every call is batched, in
// key order, and never fails its caller because the store failed: a key
// it cannot answer for is a miss (Head, Get) or a put not made.
type Store interface {
	// Head returns, per key, the payload size of the valid value the
	// store holds, or -1 (absent, corrupt, or not reachable in time). It
	// reads headers, not payloads.
	Head(ctx context.Context, keys []l1.ObjectKey) []int64
	// Get returns, per key, the checked payload, or nil for a miss. A
	// value that fails its checks is a miss, is counted and is deleted;
	// one of another format version or MAC secret (ErrForeign) is a
	// miss, counted, and left alone.
	Get(ctx context.Context, keys []l1.ObjectKey) [][]byte
	// Load is Get into the caller's memory: each key's checked payload
	// is copied into dst[i], which must be exactly the payload's length,
	// and ok[i] says whether it was. A value that fails its checks is a
	// miss, counted and deleted; a valid value of another length is a
	// miss. dst[i] of a miss may hold some of the value's bytes, which the
	// caller must not serve.
	Load(ctx context.Context, keys []l1.ObjectKey, dst [][]byte) (ok []bool)
	// Encode appends k's value with payload p to dst, as this store's
	// codec makes it (with its MACs): what Put takes.
	Encode(dst []byte, k *l1.ObjectKey, p []byte) ([]byte, error)
	// Put stores values[i], keys[i]'s value as Encode made it, and
	// returns how many it stored.
	Put(ctx context.Context, keys []l1.ObjectKey, values [][]byte) int
	// Drop counts n puts the caller dropped without a call (a full
	// queue), for the tier's metrics.
	Drop(n int)
	// Delete removes the keys' values.
	Delete(ctx context.Context, keys []l1.ObjectKey)
	// Stats returns the tier's counters.
	Stats() Stats
	// Close releases the tier's connections.
	Close() error
}

// Backend is a raw key-value store under a Tier: values by name, with
// no checks of their own. Redis is one (NewRedis). Each batch call
// returns one entry per name, in order, and the first error it met; an
// entry of a name it could not reach is nil (Get, GetPrefix), 0
// (StrLen) or false (Set).
type Backend interface {
	// Get returns the values; nil for an absent one.
	Get(ctx context.Context, names []string) ([][]byte, error)
	// GetEach is Get that hands over each value as soon as its part of
	// the batch has arrived: f(i, v) once for every name (v nil when
	// absent or unreachable), from several goroutines at once. sizes[i]
	// is about how long the caller expects value i to be (a hint for the
	// batching). It returns, with the first error, after every f has
	// returned. v is f's only until f returns.
	GetEach(ctx context.Context, names []string, sizes []int, f func(i int, v []byte)) error
	// GetPrefix returns each value's first n[i] bytes (fewer for a
	// shorter value), and its whole length (-1 when absent).
	GetPrefix(ctx context.Context, names []string, n []int) ([][]byte, []int64, error)
	// Set stores the values, reporting per name whether it was stored.
	Set(ctx context.Context, names []string, values [][]byte) ([]bool, error)
	// Del removes the names.
	Del(ctx context.Context, names []string) error
	// Close releases the backend's connections.
	Close() error
}
