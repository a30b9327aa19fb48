package l2

import (
	"errors"

	"github.com/kvalloc/kvalloc/l1"
)

// refused counts a value a check refused, by why (Stats.Corrupt, Forged,
// Foreign), and reports whether the tier deletes it: a damaged value or
// a forged one, yes; a foreign one (another format version, or a MAC
// secret this node does not hold), no: it is another node's.
func (t *Tier) refused(err error) (del bool) {
	switch {
	case errors.Is(err, ErrForeign):
		t.c.foreign.Add(1)
		return false
	case errors.Is(err, ErrForged):
		t.c.forged.Add(1)
		return true
	default:
		t.c.corrupt.Add(1)
		return true
	}
}

// Encode implements Store: k's value with payload p, appended to dst, as
// the tier's codec (Options.Codec) makes it.
func (t *Tier) Encode(dst []byte, k *l1.ObjectKey, p []byte) ([]byte, error) {
	return t.opts.Codec.Encode(dst, k, p)
}

// authCounter is a Backend that counts the calls the store refused for
// the node's credentials (Redis).
type authCounter interface{ AuthFailures() uint64 }

// authFailures is the backend's count of refused credentials, or 0.
func (t *Tier) authFailures() uint64 {
	if a, ok := t.b.(authCounter); ok {
		return a.AuthFailures()
	}
	return 0
}
