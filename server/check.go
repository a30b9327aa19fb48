//go:build linux

package server

import (
	"errors"
	"fmt"
	"slices"

	"github.com/kvalloc/kvalloc/l1"
)

// Check verifies that l1's locks and the connections' ledgers agree, with
// every request held off (the gate, exclusive), and returns every
// disagreement:
//
//   - every write-locked object has exactly one holder of its current
//     write lease for its key: an open connection, or the daemon's own
//     L2 tier (a prefetch);
//   - every read-locked object's count is the sum of the holds open
//     connections and the daemon's L2 tier (a copy to L2) record under
//     its current read lease for its key;
//   - the daemon's own locks are for work in hand: a write lock for each
//     key a prefetch is loading and no other, and no more read locks than
//     objects queued for, or in, their copy to L2;
//   - l1's own counts agree with its objects: as many objects, and as many
//     write-locked ones, as its Stats say, their blocks summing to its
//     held bytes, inside the pool and pairwise disjoint;
//   - the allocator's invariants hold (allocator.Verify), and its used
//     bytes are the objects' blocks plus the quarantined ones: no block
//     is lost.
//
// Records under leases l1 no longer honours (a lock that lapsed, an object
// deleted with force) are allowed: they are dropped when presented, or at
// the end of the connection, without touching anyone's lock.
func (s *Server) Check() error {
	r := s.Verify()
	return errors.Join(r.errs...)
}

// VerifyReport is what one Verify found: the figures it checked, read at
// one instant with every request held off, and every disagreement.
type VerifyReport struct {
	// Errors are the disagreements Check lists; none when all holds.
	Errors []string `json:"errors"`
	// UsedBytes is the allocator's; HeldBytes the objects' blocks (l1's
	// count) and QuarantinedBytes the quarantined blocks'. Check holds
	// UsedBytes == HeldBytes + QuarantinedBytes.
	UsedBytes        int64 `json:"used_bytes"`
	HeldBytes        int64 `json:"held_bytes"`
	QuarantinedBytes int64 `json:"quarantined_bytes"`
	// Objects are l1's objects: WriteLocked of them being written,
	// ReadLocked holding ReadLocks read locks in all, Evictable finished
	// and unlocked.
	Objects     int   `json:"objects"`
	WriteLocked int   `json:"write_locked"`
	ReadLocked  int   `json:"read_locked"`
	ReadLocks   int64 `json:"read_locks"`
	Evictable   int   `json:"evictable"`
	// Conns is the number of open connections.
	Conns int `json:"conns"`

	errs []error
}

// Verify runs Check's checks and returns the figures with the findings.
// Like Check it holds every request off while it runs: O(objects).
func (s *Server) Verify() VerifyReport {
	s.gate.Lock()
	defer s.gate.Unlock()
	s.mu.Lock()
	writers := map[l1.Lease][]l1.ObjectKey{}
	readers := map[l1.Lease]map[l1.ObjectKey]int64{}
	var handleErrs []error
	for c := range s.conns {
		if err := c.own.checkHandles(); err != nil {
			handleErrs = append(handleErrs, fmt.Errorf("connection %d: %w", c.id, err))
		}
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
	r := VerifyReport{Conns: len(s.conns), errs: handleErrs}
	restartReads := s.restartReads
	s.mu.Unlock()
	s.l2.holds(writers, readers) // the daemon's own locks (l2.go)
	// The read locks a restart carried over (handoff.go): nobody's
	// connection holds them; they lapse with their leases.
	for l, rr := range restartReads {
		if st, ok := s.mgr.State(rr.key); ok && st.ReadLease == l && st.ReadLocks > 0 {
			if readers[l] == nil {
				readers[l] = map[l1.ObjectKey]int64{}
			}
			readers[l][rr.key] += rr.n
		}
	}
	bad := func(format string, a ...any) { r.errs = append(r.errs, fmt.Errorf(format, a...)) }
	s.l2.verifyOwn(bad)
	snap := s.mgr.Snapshot()
	var held int64
	type span struct{ off, end int64 }
	spans := make([]span, 0, len(snap))
	size := int64(len(s.pool.Bytes()))
	for _, e := range snap {
		held += e.Block.Size
		spans = append(spans, span{e.Block.Offset, e.Block.Offset + e.Block.Size})
		if e.Block.Offset < 0 || e.Block.Size <= 0 || e.Block.Offset > size-e.Block.Size {
			bad("%v has block [%d, +%d) outside the pool of %d bytes", e.Key, e.Block.Offset, e.Block.Size, size)
		}
		switch {
		case e.WriteLocked:
			r.WriteLocked++
			ks := writers[e.WriteLease]
			if len(ks) != 1 || ks[0] != e.Key {
				bad("%v is write-locked under lease %d, held by %d open connections as %v", e.Key, e.WriteLease, len(ks), ks)
			}
		case e.Evictable:
			r.Evictable++
		}
		if e.ReadLocks > 0 {
			r.ReadLocked++
			r.ReadLocks += int64(e.ReadLocks)
			if n := readers[e.ReadLease][e.Key]; n != int64(e.ReadLocks) {
				bad("%v holds %d read locks under lease %d; open connections record %d", e.Key, e.ReadLocks, e.ReadLease, n)
			}
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return int(min(max(a.off-b.off, -1), 1)) })
	for i := 1; i < len(spans); i++ {
		if spans[i].off < spans[i-1].end {
			bad("two objects' blocks overlap: [%d, %d) and [%d, %d)", spans[i-1].off, spans[i-1].end, spans[i].off, spans[i].end)
		}
	}
	if err := s.alloc.Verify(); err != nil {
		bad("allocator: %w", err)
	}
	st := s.mgr.Stats()
	r.Objects, r.HeldBytes, r.QuarantinedBytes = st.Objects, st.Held, st.QuarantinedBytes
	r.UsedBytes = s.alloc.Stats().Used
	if st.Objects != len(snap) || st.WriteLocked != r.WriteLocked || st.Held != held {
		bad("l1 counts %d objects (%d write-locked) holding %d bytes; its objects are %d (%d write-locked) holding %d",
			st.Objects, st.WriteLocked, st.Held, len(snap), r.WriteLocked, held)
	}
	if r.UsedBytes != held+r.QuarantinedBytes {
		bad("allocator uses %d bytes; the objects hold %d and quarantine %d", r.UsedBytes, held, r.QuarantinedBytes)
	}
	for _, e := range r.errs {
		r.Errors = append(r.Errors, e.Error())
	}
	s.dbg.checks.Add(1)
	if len(r.errs) > 0 {
		s.dbg.checkFailures.Add(1)
	}
	return r
}
