package mutant

import (
	"fmt"
	"slices"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// OOMMiddle gives OutOfMemory to the middle one of the keys a ReserveWrite
// newly allocated (when it allocated at least three): it aborts that key's
// reservation and reports it out of memory, so the granted keys are no
// longer a prefix.
type OOMMiddle[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite reserves, then takes back the middle new key.
func (m OOMMiddle[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	existed := make([]bool, len(keys))
	for i, k := range keys {
		_, existed[i] = m.State(k)
	}
	res, err := m.Manager.ReserveWrite(keys, temporary, size, mode)
	if err != nil {
		return res, err
	}
	var fresh []int
	for i, r := range res {
		if r.Status == l1.OK && !existed[i] {
			fresh = append(fresh, i)
		}
	}
	if len(fresh) >= 3 {
		i := fresh[len(fresh)/2]
		m.AbortWrite([]K{keys[i]})
		res[i] = l1.Result{Status: l1.OutOfMemory}
	}
	return res, nil
}

// RepeatAllocTwice allocates a second block for every repeated occurrence
// of a key in a successful ReserveWrite and drops it, as LMCache did: the
// second buffer overwrote the first in its map and one of them leaked.
type RepeatAllocTwice[K comparable] struct {
	*l1.Manager[K]
	Mem       l1.Memory
	Placement allocator.Placement
}

// ReserveWrite reserves, then leaks one block per repeated key.
func (m RepeatAllocTwice[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	res, err := m.Manager.ReserveWrite(keys, temporary, size, mode)
	if err != nil {
		return res, err
	}
	for i, k := range keys {
		if slices.Index(keys, k) != i {
			_, _ = m.Mem.AllocateBatch(size, 1, m.Placement)
		}
	}
	return res, nil
}

// ReversedPrefix grants the largest suffix instead of the largest prefix:
// it reserves the keys in reverse order and reverses the answer back.
type ReversedPrefix[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite reserves keys back to front.
func (m ReversedPrefix[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	rk, rt := slices.Clone(keys), slices.Clone(temporary)
	slices.Reverse(rk)
	slices.Reverse(rt)
	res, err := m.Manager.ReserveWrite(rk, rt, size, mode)
	slices.Reverse(res)
	return res, err
}

// TailNotWritable answers KeyNotWritable instead of OutOfMemory for the
// tail after a partial grant: the caller cannot tell "no room" from "not
// allowed".
type TailNotWritable[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite relabels every OutOfMemory.
func (m TailNotWritable[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	res, err := m.Manager.ReserveWrite(keys, temporary, size, mode)
	for i := range res {
		if res[i].Status == l1.OutOfMemory {
			res[i].Status = l1.KeyNotWritable
		}
	}
	return res, err
}

// TruncateFlags handles a temporary slice of the wrong length as Python's
// zip(strict=False) does: it silently reserves only as many keys as there
// are flags (LMCache's bug), instead of rejecting the call.
type TruncateFlags[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite truncates to the shorter of keys and temporary.
func (m TruncateFlags[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	if len(temporary) == 0 || len(temporary) == len(keys) {
		return m.Manager.ReserveWrite(keys, temporary, size, mode)
	}
	n := min(len(keys), len(temporary))
	res, err := m.Manager.ReserveWrite(keys[:n], temporary[:n], size, mode)
	if err != nil {
		return res, err
	}
	for len(res) < len(keys) {
		res = append(res, l1.Result{Status: l1.KeyNotWritable})
	}
	return res, nil
}

// forever is a lock lifetime no test reaches.
const forever = 1_000_000 * time.Hour

// WritesNeverExpire configures a manager whose write locks never lapse, so
// an abandoned write is never reclaimed and, once finished, becomes
// readable: LMCache's "expired writes become readable" as a model sees it.
func WritesNeverExpire(c *l1.Config) { c.WriteTTL = forever }

// ReadsNeverExpire configures a manager whose read locks never lapse, so a
// temporary object whose reader vanished is never freed.
func ReadsNeverExpire(c *l1.Config) { c.ReadTTL = forever }

// PrefixNoneIgnored configures PrefixNone to behave as PrefixOnePass: the
// all-or-nothing strategy grants a prefix.
func PrefixNoneIgnored(c *l1.Config) {
	if c.Prefix == l1.PrefixNone {
		c.Prefix = l1.PrefixOnePass
	}
}

// RejectLate rejects a call with mismatched temporary flags only after
// reserving the keys that have flags: the error is right, but the rejected
// call changed state.
type RejectLate[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite reserves the flagged keys, then returns ErrInvalidArgument.
func (m RejectLate[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	if len(temporary) == 0 || len(temporary) == len(keys) {
		return m.Manager.ReserveWrite(keys, temporary, size, mode)
	}
	n := min(len(keys), len(temporary))
	_, _ = m.Manager.ReserveWrite(keys[:n], temporary[:n], size, mode)
	return nil, fmt.Errorf("%w: %d temporary flags for %d keys", l1.ErrInvalidArgument, len(temporary), len(keys))
}
