package client

import (
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Lookup is a lookup's answer: keys [0, L1) are readable in L1, keys
// [L1, L1+L2) are in the daemon's L2 store, and the daemon began loading
// [L1, L1+Prefetch) into L1 (PROTOCOL.md, "The L2 tier").
type Lookup = wire.Lookup

// Lookup asks how much of keys, as a prefix, the node's L1 and the L2
// store hold, without locking anything or waiting for bytes. With
// prefetch the daemon also starts loading the L2 part into L1, under
// write locks of its own; ReserveReadPrefixWait then reads it. A daemon
// without L2, or whose L2 is down, answers L2 = 0: L2 never makes it fail.
//
// A daemon counts only the L2 hits that pay: while its estimate of its
// L2 load rate is below its break-even (kvallocd -l2-min-rate), L2 = 0.
func (c *Client) Lookup(keys []l1.ObjectKey, prefetch bool) (Lookup, error) {
	return c.LookupWithin(keys, prefetch, 0)
}

// LookupWithin is Lookup with a budget: the daemon counts (and
// prefetches) only the L2 hits it estimates it can load within budget
// from now, a prefix of them; the rest answer as misses. The budget is
// rounded up to a microsecond and must be in [0, wire.MaxWait µs]; 0 is
// no budget, Lookup.
func (c *Client) LookupWithin(keys []l1.ObjectKey, prefetch bool, budget time.Duration) (Lookup, error) {
	return c.LookupSized(keys, nil, prefetch, budget)
}

// LookupSized is LookupWithin for a reader that knows the payload size of
// each key's object, sizes[i] bytes (its layout: the KV bytes of a chunk
// at its TP degree and dtype), one per key, each at least 1; nil is
// LookupWithin. A key is then counted, in L1 or L2, and prefetched, only
// when its object or value is exactly that size: the L1 prefix stops at
// an object of another size, and so does the lookup (L2 = 0), and the L2
// run stops at a value of another size (PROTOCOL.md, "Expected sizes").
// A daemon older than expected sizes answers BAD_FRAME and closes the
// connection.
func (c *Client) LookupSized(keys []l1.ObjectKey, sizes []int64, prefetch bool, budget time.Duration) (Lookup, error) {
	if err := checkSizes(keys, sizes); err != nil {
		return Lookup{}, err
	}
	us := (budget + time.Microsecond - 1) / time.Microsecond
	if budget < 0 || us > wire.MaxWait {
		return Lookup{}, &wire.Error{Code: wire.CodeInvalidArgument, Msg: fmt.Sprintf("lookup budget %v outside [0, %v]", budget, wire.MaxWait*time.Microsecond)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.keyed(wire.TypeLookup, keys)
	q.Size = int64(us)
	q.Sizes = sizes
	if prefetch {
		q.Flags = wire.FlagPrefetch
	}
	if err := c.call(); err != nil {
		return Lookup{}, err
	}
	return c.ans.Lookup, nil
}

// ReserveReadPrefixWait is ReserveReadPrefix after waiting, up to wait,
// for the daemon's prefetch of keys (started by Lookup) to finish. A key
// still loading when the wait ends stops the prefix as KEY_NOT_READABLE,
// and one that failed to load as KEY_NOT_EXIST: a miss, never an error.
// The wait is rounded up to a microsecond and must be in [0, wire.MaxWait
// µs]; 0 is ReserveReadPrefix.
func (c *Client) ReserveReadPrefixWait(keys []l1.ObjectKey, locks int, wait time.Duration) ([]Result, int, error) {
	return c.ReserveReadPrefixWaitSized(keys, nil, locks, wait)
}

// ReserveReadPrefixWaitSized is ReserveReadPrefixWait for a reader that
// expects each key's object to be sizes[i] bytes, one per key, each at
// least 1; nil is ReserveReadPrefixWait. The prefix also stops at the
// first key whose object is finished in another size: its result is
// wire.StatusSizeMismatch (a miss, not locked) and the keys after it
// are SKIPPED. Every key of the prefix is an object of exactly its
// expected size (PROTOCOL.md, "Expected sizes"); the block is that size
// rounded up to the alignment, and a block loaded from L2 holds zeros
// past the payload. A daemon older than expected sizes answers
// BAD_FRAME and closes the connection.
func (c *Client) ReserveReadPrefixWaitSized(keys []l1.ObjectKey, sizes []int64, locks int, wait time.Duration) ([]Result, int, error) {
	if err := checkSizes(keys, sizes); err != nil {
		return nil, 0, err
	}
	us := (wait + time.Microsecond - 1) / time.Microsecond
	if wait < 0 || us > wire.MaxWait {
		return nil, 0, &wire.Error{Code: wire.CodeInvalidArgument, Msg: fmt.Sprintf("wait %v outside [0, %v]", wait, wire.MaxWait*time.Microsecond)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.keyed(wire.TypeReserveReadPrefixWait, keys)
	q.Size = int64(us)
	q.Sizes = sizes
	if err := setLocks(q, locks, true); err != nil {
		return nil, 0, err
	}
	if err := c.call(); err != nil {
		return nil, 0, err
	}
	c.granted(keys, locks)
	return c.results(), int(c.ans.Prefix), nil
}

// checkSizes refuses expected sizes that are not one per key, or below 1,
// before anything is sent: INVALID_ARGUMENT, the connection unchanged.
func checkSizes(keys []l1.ObjectKey, sizes []int64) error {
	if sizes == nil {
		return nil
	}
	if len(sizes) != len(keys) {
		return &wire.Error{Code: wire.CodeInvalidArgument, Msg: fmt.Sprintf("%d expected sizes for %d keys", len(sizes), len(keys))}
	}
	for i, z := range sizes {
		if z < 1 {
			return &wire.Error{Code: wire.CodeInvalidArgument, Msg: fmt.Sprintf("expected size %d of key %d: an object is at least 1 byte", z, i)}
		}
	}
	return nil
}
