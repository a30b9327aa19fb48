// Package l1 is the L1 object manager of a KV cache: it keeps one object
// per key (one KV chunk) in blocks of a Memory (an *allocator.Allocator or
// any Memory), and hands out read and write locks on the objects. It
// re-implements LMCache's L1Manager; DESIGN.md, beside this file, says how
// it works, where it differs from LMCache and what it costs.
//
// # Calls
//
//	ReserveWrite(keys, temporary, size, mode)        write-lock; allocate missing keys; write leases
//	ReserveWriteChain(keys, positions, ...)           the same, with each key's place in its prefix chain
//	    FinishWrite(keys, leases)                     commit: readable
//	    FinishWriteAndReserveRead(keys, leases, locks) commit and read-lock at once; read leases
//	    AbortWrite(keys, leases)                      discard the reservation
//	ReserveRead(keys, locks)                          read-lock; get the blocks and read leases
//	ReserveReadPrefix(keys, locks)                    read-lock the longest readable prefix, stop at
//	                                                  the first miss; AppendReadPrefix: leases only
//	    UnsafeRead(keys)                              blocks of read-locked keys
//	    FinishRead(keys, leases, locks)               unlock; temporary objects go
//	ReserveReadUntracked, FinishReadUntracked        the same locks for an owner's own copy: no use
//	                                                  recorded, no lookup counted, no event
//	Delete(keys, force), Clear(force), Close()        remove
//	Touch(keys), EvictTo(ratio)                       recency; eviction, in Config.Eviction's order
//	Export(), Restore(mem, cfg, saved)                finished objects and their eviction order, out of
//	                                                  one manager and into a new one (a restart)
//	State(key), Snapshot(), IsEvictable(key), Len(), Stats(), Usage()
//
// The Manager is safe for concurrent use: every call is atomic, and each
// read (IsEvictable and Usage included) sees the state between two calls.
// Every batch call returns one Status (or Result) per key, in the order of
// the keys, and an error. Arguments are validated before anything changes:
// a bad call returns an error wrapping ErrInvalidArgument and leaves the
// manager as it was. After Close every call that names keys or changes
// anything returns ErrClosed, never KeyNotExist. Listeners hear what each
// call changed, after the call, in call order (see Listener).
//
// # Leases
//
// Locks expire, so a holder can outlive its lock: a writer stalls past the
// write TTL, its object is reclaimed, and another writer reserves the same
// key, often getting the same block back. So every lock a call grants
// comes with a Lease (Result.Lease), and the calls that finish a lock must
// present it:
//
//	t0  A: ReserveWrite(k)          → OK, block b, lease 7
//	t1  A stalls; its write lock lapses; k is reclaimed, b freed
//	t2  B: ReserveWrite(k)          → OK, block b again, lease 8
//	t3  A: FinishWrite(k, lease 7)  → StaleLease: nothing committed,
//	                                  B's reservation stands
//	t4  B: FinishWrite(k, lease 8)  → OK: B's bytes become readable
//
// AbortWrite and FinishWriteAndReserveRead present the write lease the
// same way. Read locks are shared, so readers share a lease: the read
// lock's epoch, which changes each time the lock goes from not held to
// held. A reader whose hold lapsed presents the old epoch, and its
// FinishRead answers StaleLease instead of releasing holds that readers
// took after the lapse. A stale lease changes nothing: nothing is
// committed, aborted, unlocked or freed. Leases are unique per manager and
// never 0; a finishing call with len(leases) != len(keys) is rejected. A
// holder that keeps its lease past a lapse learns KeyNotExist (the object
// was reclaimed and nobody took the key), KeyInWrongState (someone took and
// finished it) or StaleLease (someone holds it now); in no case did its
// call take effect.
//
// A lock is a count and one expiry: every lock call on it moves the
// expiry for all its holders, and a lapse drops every hold at once.
//
// # Forced deletes
//
// No block is freed, reissued or evicted while a lease on it is live.
// Delete and Clear with force remove an object whatever its locks: the key
// is gone at once (KeyNotExist; writable again, under a new block), but a
// locked object's block is held, like a lapsed write's in the quarantine
// and counted in Stats.QuarantinedBytes, until every holder of its live
// lease has let go:
//
//	t0  A: ReserveWrite(k)           → OK, block b, lease 7
//	t1  C: Delete(k, force)          → OK: k is gone, b held for lease 7
//	t2  B: ReserveWrite(k)           → OK, block c ≠ b, lease 8
//	t3  A: FinishWrite(k, lease 7)   → WriteDeleted: nothing published, b freed
//	t4  B: FinishWrite(k, lease 8)   → OK: readers see B's bytes
//
// A writer's AbortWrite answers OK, its FinishWrite and
// FinishWriteAndReserveRead WriteDeleted; each frees the block. Readers'
// FinishRead calls answer OK, each releasing its holds; the last frees the
// block. UnsafeRead and State answer for the key, which is gone: the
// holders keep the block their lock call returned. A held lease also ends
// when its lock lapses, at the expiry it had when the key was deleted, and
// the block is freed then (a write under Config.QuarantineLapsedWrites
// waits for its owner instead).
//
// # Quarantine
//
// Config.QuarantineLapsedWrites is for writers that may outlive their
// write locks and still be writing, the processes of a node pool: a write
// whose lock lapses drops its key (unreadable; anyone may reserve the key
// again, under a new block) but its block stays allocated, never freed,
// reissued or evicted, until its owner presents the lease to AbortWrite
// (OK) or FinishWrite (WriteLapsed: the write is dropped), or Close runs.
// Stats.QuarantinedBytes counts those bytes, and those of blocks held for
// the holders of deleted keys' locks: over a memory only the manager uses,
// Used == Held + QuarantinedBytes.
//
// # Time
//
// TTLs go from 1 ns to NoExpiry (math.MaxInt64), which never lapses: the
// arithmetic saturates. The clock (Config.Now) may jump either way by any
// amount: the manager counts only the clock's forward steps, so a jump
// back neither revives a lapsed lock nor lapses a live one, and a jump
// forward lapses every lock with a finite TTL.
//
// # The object life cycle
//
//	              ReserveWrite (a missing key)
//	┌──────────┐ ──────────────────────────────▶ ┌──────────────┐
//	│          │  AbortWrite, write TTL lapse    │              │
//	│          │ ◀────────────────────────────── │ write-locked │ ─────────────────────────────┐
//	│          │                                 └──────────────┘                              │
//	│          │                                    FinishWrite│ ▲ ReserveWrite (all or        │
//	│          │                                               ▼ │ update mode)                │
//	│          │                                 ┌──────────────┐                              │
//	│  (none)  │  Delete, Clear, eviction        │              │                              │
//	│          │ ◀────────────────────────────── │    ready     │                              │
//	│          │                                 └──────────────┘                              │
//	│          │                                    ReserveRead│ ▲ FinishRead to 0             │
//	│          │                                               ▼ │ (an ordinary object)        │
//	│          │  FinishRead to 0, or read       ┌──────────────┐ FinishWriteAndReserveRead    │
//	│          │  TTL lapse (temporary)          │ read-locked  │ ◀────────────────────────────┘
//	│          │ ◀────────────────────────────── │  (count n)   │ ◀──┐ ReserveRead,
//	└──────────┘                                 └──────────────┘ ───┘ FinishRead to n > 0
//
// Delete(force) and Clear(force) remove an object in any state; a locked
// one's block waits for its holders (see "Forced deletes").
//
// An object is readable when it is not write-locked: a write is invisible
// until FinishWrite. It is writable again (modes ModeAll and ModeUpdate)
// when it holds no live lock, is not temporary and its block holds the new
// size; a re-lock keeps the object's own temporary flag. It is evictable
// when it is ready (finished, no live lock), temporary or not. A temporary
// object is removed when its last read lock is released. A lapsed write
// lock reclaims the object (unfinished data never becomes readable), a
// lapsed read lock reclaims a temporary object and just unlocks any other;
// under Config.QuarantineLapsedWrites a lapsed write lock drops the key
// and quarantines the block instead of freeing it.
//
// # The prefix contract
//
// ReserveWrite allocates the keys that need memory (missing keys in modes
// ModeAll and ModeNew) as one batch of objects of one size. When the whole
// batch does not fit it grants the largest prefix that does:
//
//   - k is the most objects of that size the memory can hold at that
//     moment (for the allocator, min(n, Σ⌊extent/size⌋) over its free
//     extents, what allocator.Fit reports; for Contiguous placement, the
//     most one extent holds);
//   - the first k keys needing memory, in request order, get OK, each
//     write-locked with its own block; every later one gets OutOfMemory
//     and the zero Block;
//   - keys that needed no memory (re-locked, or refused) are unaffected;
//   - listeners hear only the granted keys;
//   - a one-key batch, and a size larger than the memory's capacity, are
//     all or nothing.
//
// The manager gets k from its memory's AppendUpTo in one call (LMCache's
// search with trial allocations, and its all-or-nothing answer before
// that fix, are memory wrappers in internal/reference/baseline, measured
// beside it). With Config.EvictOnDemand, evictable objects the call does
// not name are evicted first, in the order of the eviction policy, until
// the batch fits: exactly the victims of the loop "evict the next victim,
// then ask whether the batch fits", and no more. A key repeated within one
// call is reserved once; its later occurrences answer KeyNotWritable.
//
// # Prefix lookups
//
// A serving engine looks up a request's blocks as a chain: the longest
// cached prefix is a hit, and everything behind the first miss is
// recomputed. ReserveReadPrefix (and AppendReadPrefix, which keeps only the
// leases and allocates nothing) read-lock that prefix in one call and stop
// at the first key that is missing or write-locked: its Result says which,
// and every later key is Skipped, neither locked nor made recently used.
// ReserveRead would lock every readable key of the chain.
//
// # Eviction
//
// Eviction takes only evictable objects, on demand (Config.EvictOnDemand)
// or by EvictTo, in the order of Config.Eviction: LRU, prefix-aware (a
// chain's tail first) or S3-FIFO, and on-demand eviction counts what each
// victim frees in O(1) (Memory.FreeAround). With Scattered placement over the
// allocator, a victim's block may go to the new object as it is, under a
// new generation (allocator.Reissue), so the victim's handle is stale
// either way. A caller that knows a block is partial (a prompt's last
// block, not full of tokens) ORs Partial into its position in
// ReserveWriteChain: once evictable, such an object is the next victim
// (under S3-FIFO, the next of its queue), until a use clears the hint.
//
// # Self-checks
//
// Built with -tags invariants, every call verifies the manager's whole
// state as it ends (held bytes, records and index, expiry queues, the
// eviction set, leases, hints, quarantine) and panics, naming the call,
// when the state is wrong. Without the tag the check is compiled out.
package l1
