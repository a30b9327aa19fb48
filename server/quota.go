//go:build linux

package server

import (
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Per-connection limits: what one connection may hold, and the largest
// frame it may send, so that one allowed client cannot take every block
// of the pool into its locks.
//
//   - Config.ConnReadLocks bounds the read locks a connection holds (the
//     sum of its counts, as finish_read gives them back);
//   - Config.ConnWriteBytes bounds the bytes its write reservations ask
//     for (each reservation counts the size its reserve_write asked);
//   - Config.MaxFrame bounds a request frame, header included; the hello
//     answer announces it, and a frame over it is answered TOO_LARGE and
//     closed, as one over the protocol's MaxFrame is.
//
// A request that would pass a hold limit is cut, as l1 cuts a batch that
// does not fit the memory: the first k keys of the request, in request
// order, are carried out exactly as they would be without the limit, and
// every later key is answered OVER_LIMIT and not passed to l1 (for
// reserve_read_prefix the first key past the cut is OVER_LIMIT when the
// prefix reached it, and the rest are SKIPPED, as after any stop). k is
// the most keys whose full cost fits what the connection has left: locks
// per key for the reading calls, the requested size per key for
// reserve_write. It is computed from the request alone, before l1 is
// asked, so every key up to the cut counts, whatever l1 then answers for
// it. A one-key call is thus all or nothing, and a connection at its limit
// changes nothing until it gives something back.
//
// The status names what binds. A reserve_write is not cut where memory
// binds before the limit can: a ConnWriteBytes of the pool's size or more,
// or an object larger than the pool; l1 answers it whole. And when the
// cut prefix itself ran out of memory, the keys past the cut are
// OUT_OF_MEMORY, as l1 would have answered them, not OVER_LIMIT.

// Defaults of the per-connection limits, sized for a node of 8 GPUs at
// TP 8: some 64 engine ranks on one daemon, each restoring or storing
// batches of about 5700 keys of 8 MiB, in a pool of about 1 TiB (131,072
// such blocks).
const (
	// DefaultConnReadLocks: 16,384 locks, almost three 5700-key restores
	// in flight on one connection; at 8 MiB a key, 128 GiB, an eighth of
	// the pool.
	DefaultConnReadLocks = 16384
	// DefaultConnWriteBytes: 64 GiB, one 5700 × 8 MiB store (44.5 GiB)
	// with room to spare; a sixteenth of the pool.
	DefaultConnWriteBytes = 64 << 30
	// DefaultMaxFrame is the protocol's own MaxFrame (16 MiB): a
	// 10,000-key frame is about 480 KB, MaxKeys keys with hashes up to
	// some 200 bytes still fit, and what all connections' frames take at
	// once is the shared frame-buffer budget's to bound.
	DefaultMaxFrame = wire.MaxFrame
	// MinMaxFrame is the smallest MaxFrame accepted: room for a hello and
	// a few keys.
	MinMaxFrame = 4096
)

// limitsWithDefaults fills and checks the limit fields.
func (c *Config) limitsWithDefaults() error {
	if c.ConnReadLocks == 0 {
		c.ConnReadLocks = DefaultConnReadLocks
	}
	if c.ConnWriteBytes == 0 {
		c.ConnWriteBytes = DefaultConnWriteBytes
	}
	if c.MaxFrame == 0 {
		c.MaxFrame = DefaultMaxFrame
	}
	switch {
	case c.ConnReadLocks < 0:
		return fmt.Errorf("%w: per-connection read locks %d", l1.ErrInvalidArgument, c.ConnReadLocks)
	case c.ConnWriteBytes < 0:
		return fmt.Errorf("%w: per-connection write bytes %d", l1.ErrInvalidArgument, c.ConnWriteBytes)
	case c.MaxFrame < MinMaxFrame || c.MaxFrame > wire.MaxFrame:
		return fmt.Errorf("%w: max frame %d outside [%d, %d]", l1.ErrInvalidArgument, c.MaxFrame, MinMaxFrame, wire.MaxFrame)
	}
	return nil
}

// overFrame returns the refusal of a frame whose header announces size
// bytes, over the connection's MaxFrame, or nil.
func (c *conn) overFrame(size uint32) *wire.Error {
	if int64(size) <= int64(c.s.cfg.MaxFrame) {
		return nil
	}
	return &wire.Error{Code: wire.CodeTooLarge, Msg: fmt.Sprintf("frame size %d over this daemon's limit of %d bytes (flag -max-frame)", size, c.s.cfg.MaxFrame)}
}

// fit returns how many of q's keys, from the first, the connection's
// limits let through: len(q.Keys) when all of them. A request l1 will
// refuse whole (locks or size out of range) is not cut, so that l1's
// refusal is its answer.
func (c *conn) fit(q *wire.Request) int {
	n := len(q.Keys)
	var room, cost int64
	switch q.Type {
	case wire.TypeReserveRead, wire.TypeReserveReadPrefix, wire.TypeReserveReadPrefixWait, wire.TypeFinishWriteAndReserveRead:
		if q.Locks < 1 || q.Locks > l1.MaxReadLocks {
			return n
		}
		room, cost = c.s.cfg.ConnReadLocks-c.own.reads.count, int64(q.Locks)
	case wire.TypeReserveWrite:
		// Where the memory binds before the limit can, l1's
		// OUT_OF_MEMORY is the answer: a limit of the pool's size or
		// more (one connection cannot hold more than the pool), and an
		// object larger than the pool.
		if pool := int64(len(c.s.pool.Bytes())); q.Size <= 0 || q.Size > pool || c.s.cfg.ConnWriteBytes >= pool {
			return n
		}
		room, cost = c.s.cfg.ConnWriteBytes-c.own.writes.count, q.Size
	default:
		return n
	}
	if room <= 0 {
		return 0
	}
	return int(min(int64(n), room/cost))
}

// cut shortens q to its first k keys, for the l1 call.
func cut(q *wire.Request, k int) {
	q.Keys = q.Keys[:k]
	// The decoder keeps its slices between requests: one the request does
	// not carry is empty, not nil.
	if len(q.Temporary) > k {
		q.Temporary = q.Temporary[:k]
	}
	if len(q.Positions) > k {
		q.Positions = q.Positions[:k]
	}
	if len(q.Sizes) > k {
		q.Sizes = q.Sizes[:k]
	}
	if len(q.Leases) > k {
		q.Leases = q.Leases[:k]
	}
}

// dispatchLimited is dispatch under the connection's hold limits: the
// keys past the cut are answered OVER_LIMIT (SKIPPED after the first, for
// a prefix lookup) and l1 sees only the ones before it.
func (c *conn) dispatchLimited(q *wire.Request, a *wire.Answer) error {
	n, k := len(q.Keys), c.fit(q)
	if k == n {
		return c.dispatch(q, a)
	}
	cut(q, k)
	if err := c.dispatch(q, a); err != nil {
		return err
	}
	// A reserve_write whose cut prefix already ran out of memory: the
	// keys past the cut would have been OUT_OF_MEMORY too (l1 grants the
	// longest prefix that fits), and that is what binds.
	oom := q.Type == wire.TypeReserveWrite && len(a.Results) > 0 && a.Results[len(a.Results)-1].Status == wire.StatusOutOfMemory
	if !oom {
		c.s.overLimit.Add(uint64(n - k))
	}
	for i := range n - k {
		st := wire.StatusOverLimit
		if oom {
			a.Results = append(a.Results, wire.Result{Status: wire.StatusOutOfMemory})
			continue
		}
		if prefix := q.Type == wire.TypeReserveReadPrefix || q.Type == wire.TypeReserveReadPrefixWait; prefix && (i > 0 || int(a.Prefix) < k) {
			st = wire.StatusSkipped
		}
		a.Results = append(a.Results, wire.Result{Status: st})
	}
	return nil
}
