package trace

// Every call the replay makes into l1 is in this file, so that a change of
// l1's API is a change here only.
//
// Leases. ReserveRead and ReserveWrite hand out a lease per key
// (Result.Lease), which FinishWrite and FinishRead take back. The replay
// keeps one lease per reservation in its flight (flight.readLeases,
// flight.writeLeases), in the order of the keys it will finish.
//
// Chain order. The prefix-aware eviction policy (l1.EvictPrefix) ranks a
// chain's later blocks below its earlier ones. reserveWrite is the only
// place that stores, and it passes each key's position in its request's
// chain to ReserveWriteChain.

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
)

// lease is what a reservation hands back for its finish (see above).
type lease = l1.Lease

// leaseOf returns the lease of one granted key.
func leaseOf(r l1.Result) lease { return r.Lease }

// newManager returns the l1 manager of a replay over mem.
func newManager(mem *allocator.Allocator, cfg l1.Config) (*l1.Manager[int32], error) {
	return l1.New[int32](mem, cfg)
}

// readPrefix read-locks the longest readable prefix of keys in one
// AppendReadPrefix, which stops at the first miss so that nothing behind it
// is locked or made more recently used, and appends a lease per locked key
// to leases. It returns the number of keys locked.
func readPrefix(m *l1.Manager[int32], keys []int32, leases []lease) (int, []lease, error) {
	leases, n, err := m.AppendReadPrefix(leases, keys, 1)
	return n, leases, err
}

// reserveWrite reserves the keys for writing, in one
// AppendReserveWriteChain in mode ModeNew, appending a Result per key to
// dst (a buffer the caller reuses): keys that exist (resident behind a
// miss, or being written by another request) are left alone. first is the
// position of keys[0] in its request's chain of blocks; keys[i] is at
// first+i. With partial, the last key carries l1.Partial (the request's
// last block, known to be partial). Without the prefix-aware policy and the
// hint, no positions are passed (as ReserveWrite does). pos is a buffer for
// the positions, returned for reuse.
func reserveWrite(m *l1.Manager[int32], dst []l1.Result, keys []int32, first int, size int64, partial bool, pos []uint32) ([]l1.Result, []uint32, error) {
	if m.Config().Eviction != l1.EvictPrefix && !partial {
		rs, err := m.AppendReserveWriteChain(dst, keys, nil, nil, size, l1.ModeNew)
		return rs, pos, err
	}
	pos = pos[:0]
	for i := range keys {
		pos = append(pos, uint32(first+i))
	}
	if partial && len(pos) > 0 {
		pos[len(pos)-1] |= l1.Partial
	}
	rs, err := m.AppendReserveWriteChain(dst, keys, pos, nil, size, l1.ModeNew)
	return rs, pos, err
}

// finishWrite commits the granted keys.
func finishWrite(m *l1.Manager[int32], keys []int32, leases []lease) ([]l1.Status, error) {
	return m.FinishWrite(keys, leases)
}

// finishRead releases one read lock on each key.
func finishRead(m *l1.Manager[int32], keys []int32, leases []lease) ([]l1.Status, error) {
	return m.FinishRead(keys, leases, 1)
}

// evictTo is the periodic controller's eviction.
func evictTo(m *l1.Manager[int32], ratio float64) (int, error) { return m.EvictTo(ratio) }

// usage returns the bytes held and the capacity.
func usage(m *l1.Manager[int32]) (used, capacity int64) { return m.Usage() }

// readable reports whether key is resident and readable (not being
// written).
func readable(m *l1.Manager[int32], key int32) bool {
	s, ok := m.State(key)
	return ok && !s.WriteLocked
}

// stats returns l1's statistics.
func stats(m *l1.Manager[int32]) l1.Stats { return m.Stats() }

// closeManager closes the manager.
func closeManager(m *l1.Manager[int32]) error { return m.Close() }
