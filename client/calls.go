//go:build linux

package client

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// The batch calls. Each is one request frame and one l1 batch call in the
// daemon, with l1's meaning per key and in request order (see the l1
// package and wire/PROTOCOL.md), plus the connection's ownership: leases
// must be this Client's, and finish calls on another's are NOT_OWNER.
// Arguments the frame cannot carry (more than wire.MaxKeys keys, flags or
// leases not one per key) and arguments l1 refuses are errors wrapping
// wire.ErrInvalidArgument; a lease of another epoch is an error wrapping
// wire.ErrWrongEpoch; in every such case nothing changed. An error
// wrapping ErrDisconnected means the connection is gone.

// ReserveWrite write-locks keys for objects of size bytes: l1's
// ReserveWrite. Granted keys get a Block to write into (Bytes) and a write
// Lease for FinishWrite, AbortWrite or FinishWriteAndReserveRead.
func (c *Client) ReserveWrite(keys []l1.ObjectKey, temporary []bool, size int64, mode l1.Mode) ([]Result, error) {
	return c.ReserveWriteChain(keys, nil, temporary, size, mode)
}

// ReserveWriteChain is ReserveWrite with each key's chain position (OR
// l1.Partial into a partial last block's): l1's ReserveWriteChain.
func (c *Client) ReserveWriteChain(keys []l1.ObjectKey, positions []uint32, temporary []bool, size int64, mode l1.Mode) ([]Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.keyed(wire.TypeReserveWrite, keys)
	q.Positions, q.Temporary, q.Size, q.Mode = positions, temporary, size, mode
	if err := c.call(); err != nil {
		return nil, err
	}
	if c.book != nil {
		c.book.grant(&c.book.writes, keys, c.ans.Results, 1)
	}
	return c.results(), nil
}

// FinishWrite commits writes: l1's FinishWrite.
func (c *Client) FinishWrite(keys []l1.ObjectKey, leases []Lease) ([]Status, error) {
	return c.finish(wire.TypeFinishWrite, keys, leases, 0)
}

// AbortWrite discards write reservations: l1's AbortWrite.
func (c *Client) AbortWrite(keys []l1.ObjectKey, leases []Lease) ([]Status, error) {
	return c.finish(wire.TypeAbortWrite, keys, leases, 0)
}

// FinishRead releases read locks: l1's FinishRead, refusing (OVER_RELEASE)
// to release more than this connection holds on a key under its lease.
func (c *Client) FinishRead(keys []l1.ObjectKey, leases []Lease, locks int) ([]Status, error) {
	return c.finish(wire.TypeFinishRead, keys, leases, locks)
}

func (c *Client) finish(t wire.Type, keys []l1.ObjectKey, leases []Lease, locks int) ([]Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, err := c.ids(leases)
	if err != nil {
		return nil, err
	}
	q := c.keyed(t, keys)
	q.Leases = ids
	if err := setLocks(q, locks, t == wire.TypeFinishRead); err != nil {
		return nil, err
	}
	x := c.bookOf(t == wire.TypeFinishRead)
	c.byHandle(x, keys, ids)
	if err := c.call(); err != nil {
		return nil, err
	}
	if t == wire.TypeFinishRead {
		c.settle(x, c.ans.Statuses, locks)
	} else {
		c.settle(x, c.ans.Statuses, 0)
	}
	return c.statuses(), nil
}

// bookOf returns the book's index of reads or writes; nil on version 1.
func (c *Client) bookOf(reads bool) *leaseIndex {
	switch {
	case c.book == nil:
		return nil
	case reads:
		return &c.book.reads
	}
	return &c.book.writes
}

// granted records a read grant's holds in the book (version 2).
func (c *Client) granted(keys []l1.ObjectKey, locks int) {
	if c.book != nil {
		c.book.grant(&c.book.reads, keys, c.ans.Results, int64(locks))
	}
}

// setLocks sets a lock count the frame can carry; the daemon (l1) checks
// the range.
func setLocks(q *wire.Request, locks int, used bool) error {
	if !used {
		return nil
	}
	if locks < 0 || int64(locks) > math.MaxUint32 {
		return &wire.Error{Code: wire.CodeInvalidArgument, Msg: fmt.Sprintf("read locks %d outside [1, %d]", locks, l1.MaxReadLocks)}
	}
	q.Locks = uint32(locks)
	return nil
}

// FinishWriteAndReserveRead commits writes and read-locks them in one step:
// l1's FinishWriteAndReserveRead.
func (c *Client) FinishWriteAndReserveRead(keys []l1.ObjectKey, leases []Lease, locks int) ([]Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids, err := c.ids(leases)
	if err != nil {
		return nil, err
	}
	q := c.keyed(wire.TypeFinishWriteAndReserveRead, keys)
	q.Leases = ids
	if err := setLocks(q, locks, true); err != nil {
		return nil, err
	}
	c.byHandle(c.bookOf(false), keys, ids)
	if err := c.call(); err != nil {
		return nil, err
	}
	if c.book != nil {
		sts := slices.Grow(c.sts[:0], len(c.ans.Results))
		for _, r := range c.ans.Results {
			sts = append(sts, r.Status)
		}
		c.sts = sts
		c.settle(&c.book.writes, sts, 0)
		c.book.grant(&c.book.reads, keys, c.ans.Results, int64(locks))
	}
	return c.results(), nil
}

// ReserveRead read-locks readable keys: l1's ReserveRead.
func (c *Client) ReserveRead(keys []l1.ObjectKey, locks int) ([]Result, error) {
	res, _, err := c.reserveRead(wire.TypeReserveRead, keys, locks)
	return res, err
}

// ReserveReadPrefix read-locks the longest readable prefix of keys and
// returns how many it locked: l1's ReserveReadPrefix.
func (c *Client) ReserveReadPrefix(keys []l1.ObjectKey, locks int) ([]Result, int, error) {
	return c.reserveRead(wire.TypeReserveReadPrefix, keys, locks)
}

func (c *Client) reserveRead(t wire.Type, keys []l1.ObjectKey, locks int) ([]Result, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.keyed(t, keys)
	if err := setLocks(q, locks, true); err != nil {
		return nil, 0, err
	}
	if err := c.call(); err != nil {
		return nil, 0, err
	}
	c.granted(keys, locks)
	return c.results(), int(c.ans.Prefix), nil
}

// Delete removes objects: l1's Delete. With force a locked object's key
// goes at once, whoever holds the lock, but its block waits for its
// holders (wire/PROTOCOL.md, "What a connection owns").
func (c *Client) Delete(keys []l1.ObjectKey, force bool) ([]Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.keyed(wire.TypeDelete, keys)
	if force {
		q.Flags = wire.FlagForce
	}
	if err := c.call(); err != nil {
		return nil, err
	}
	return c.statuses(), nil
}

// Touch makes keys most recently used: l1's Touch.
func (c *Client) Touch(keys []l1.ObjectKey) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keyed(wire.TypeTouch, keys)
	return c.call()
}

// Stats returns the daemon's figures.
func (c *Client) Stats() (wire.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.req = wire.Request{Type: wire.TypeStats}
	if err := c.call(); err != nil {
		return wire.Stats{}, err
	}
	return c.ans.Stats, nil
}

// Ping is an empty request and answer: a round trip that does nothing.
func (c *Client) Ping() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.req = wire.Request{Type: wire.TypePing}
	return c.call()
}
