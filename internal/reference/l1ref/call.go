package l1ref

import (
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
)

// errInvalid is the model's answer to bad arguments.
var errInvalid = fmt.Errorf("l1ref: %w", l1.ErrInvalidArgument)

// begin is the frame of every call: arguments that are bad (bad) are an
// error wrapping l1.ErrInvalidArgument and change nothing; otherwise the
// sweep reclaims what lapsed (Sweep), and after Close the call returns
// l1.ErrClosed.
func (m *Manager[K]) begin(bad bool) error {
	if bad {
		return errInvalid
	}
	m.Sweep()
	if m.closed {
		return l1.ErrClosed
	}
	return nil
}

// perKey is begin, then each key in order, with its object as the keys
// before it left it (nil for none): the answer of every call whose keys
// are independent.
func perKey[K comparable, R any](m *Manager[K], bad bool, keys []K, each func(i int, k K, o *object) R) ([]R, error) {
	if err := m.begin(bad); err != nil {
		return nil, err
	}
	out := make([]R, len(keys))
	for i, k := range keys {
		out[i] = each(i, k, m.objects[k])
	}
	return out, nil
}

func badLocks(locks int) bool { return locks < 1 || locks > l1.MaxReadLocks }
