//go:build linux

package server

import (
	"errors"
	"fmt"

	"github.com/kvalloc/kvalloc/l1"
)

// Check verifies that l1's locks and the connections' ledgers agree, with
// every request held off (the gate, exclusive), and returns every
// disagreement:
//
//   - every write-locked object has exactly one open connection that holds
//     its current write lease for its key;
//   - every read-locked object's count is the sum of the holds open
//     connections record under its current read lease for its key;
//   - the allocator's invariants hold (allocator.Verify), and its used
//     bytes are the objects' blocks plus the quarantined ones: no block
//     is lost.
//
// Records under leases l1 no longer honours (a lock that lapsed, an object
// deleted with force) are allowed: they are dropped when presented, or at
// the end of the connection, without touching anyone's lock.
func (s *Server) Check() error {
	s.gate.Lock()
	defer s.gate.Unlock()
	s.mu.Lock()
	writers := map[l1.Lease][]l1.ObjectKey{}
	readers := map[l1.Lease]map[l1.ObjectKey]int64{}
	for c := range s.conns {
		for _, h := range c.own.writes.all() {
			writers[h.lease] = append(writers[h.lease], h.key)
		}
		for _, h := range c.own.reads.all() {
			if readers[h.lease] == nil {
				readers[h.lease] = map[l1.ObjectKey]int64{}
			}
			readers[h.lease][h.key] += h.n
		}
	}
	s.mu.Unlock()
	var errs []error
	var held int64
	for _, e := range s.mgr.Snapshot() {
		held += e.Block.Size
		if e.WriteLocked {
			ks := writers[e.WriteLease]
			if len(ks) != 1 || ks[0] != e.Key {
				errs = append(errs, fmt.Errorf("%v is write-locked under lease %d, held by %d open connections as %v", e.Key, e.WriteLease, len(ks), ks))
			}
		}
		if e.ReadLocks > 0 {
			if n := readers[e.ReadLease][e.Key]; n != int64(e.ReadLocks) {
				errs = append(errs, fmt.Errorf("%v holds %d read locks under lease %d; open connections record %d", e.Key, e.ReadLocks, e.ReadLease, n))
			}
		}
	}
	if err := s.alloc.Verify(); err != nil {
		errs = append(errs, fmt.Errorf("allocator: %w", err))
	}
	st := s.mgr.Stats()
	if used, q := s.alloc.Stats().Used, st.QuarantinedBytes; used != held+q {
		errs = append(errs, fmt.Errorf("allocator uses %d bytes; the objects hold %d and quarantine %d", used, held, q))
	}
	return errors.Join(errs...)
}
