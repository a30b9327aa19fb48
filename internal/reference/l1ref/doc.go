// Package l1ref is a slow, obviously correct model of package l1's
// Manager, in the spirit of the Go runtime's SummarizeSlow, on l1's own
// types (l1.Status, l1.Result, l1.Lease, l1.Mode, l1.ObjectState,
// l1.Entry, l1.Counters, l1.EvictionPolicy). It is as plain as possible:
// a map of objects, each with a write lock and a read lock (a hold count
// and one expiry), a use counter for LRU order, and an allocref.Alloc
// with the allocator's placement policy for memory. Nothing is indexed or
// queued, so it is slow and short enough to check by reading. The fuzz
// targets and the property tests diff the manager against it, through
// package l1check, and kvallocd, through package daemoncheck. Nothing
// outside the test harness imports it.
//
// Its files follow l1's: reserve.go (ReserveWrite), write.go (FinishWrite,
// FinishWriteAndReserveRead, AbortWrite), read.go (ReserveRead,
// ReserveReadPrefix, UnsafeRead, FinishRead), manager.go (Delete, Clear,
// Close, Touch), evict.go (IsEvictable, EvictTo, on-demand eviction),
// policy.go (the eviction policies), lock.go (locks, the clock and the
// sweep), state.go (State, Snapshot and what Stats reports). Every call
// that names keys has one frame (call.go): arguments checked, lapsed locks
// swept, ErrClosed after Close, then one answer per key in order.
//
// The rules, as plainly: every write reservation and every read epoch
// gets a lease from one counter, and a finishing call with another lease
// answers StaleLease and changes nothing; now+ttl saturates; the manager's
// time is the sum of the clock's forward steps, read at each call;
// finished temporary objects are evictable; a re-lock keeps the object's
// temporary flag; a forced Delete or Clear of a locked object drops the
// key but keeps its block taken, under the lock's lease, until the holders
// let go (a write's finish answers WriteDeleted, its abort OK; each read
// release OK, the last freeing it) or the lock's expiry passes (a write
// under QuarantineLapsedWrites: never); after Close every call that names
// keys returns l1.ErrClosed.
package l1ref
