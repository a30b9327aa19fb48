// Package server is kvallocd, the node daemon, as a library: one KV-cache
// pool per node, shared by every engine process on it over a Unix-domain
// socket, where the connection owns the locks it takes. cmd/kvallocd is
// its command line; tests run it in process.
//
// # Flow
//
// A frame enters a connection's goroutine, which decodes it (package
// wire), asks the daemon's one l1.Manager[l1.ObjectKey], which asks the
// allocator, which carves the pool; the answer goes back the same way.
// KV bytes never cross the socket: the pool is a memfd, sealed against
// shrinking and growing and mapped MAP_SHARED, which the hello answer
// passes to each client once (SCM_RIGHTS); answers name memory by offset.
//
// # Contract
//
//   - Peers are checked with SO_PEERCRED against an allowlist of uids and
//     gids (by default the daemon's own uid); anyone else gets a
//     NOT_ALLOWED answer naming its credentials, the refusal is logged, and
//     the connection is closed.
//   - The connection owns what it takes. Every write reservation and read
//     lock a request is granted is recorded against its connection (its
//     ledger). A lease presented on another connection is refused
//     (NOT_OWNER), so one client cannot finish, abort or publish another's
//     write, and a finish_read that would release more read locks than its
//     connection holds is refused (OVER_RELEASE); in both cases nothing
//     changes. A connection that said hello with protocol version 2 gets a
//     handle with each lock, the name of its ledger record, and may finish,
//     abort and delete by handle and lease: a handle that names no record
//     of this connection of the kind under that lease is NOT_OWNER, kept
//     from l1, and a handle goes with its record, so the table is bounded
//     as the ledger is (handles.go). When the connection ends, whatever the reason (a close, the
//     client's death by SIGKILL, a malformed frame, a stalled frame, the
//     daemon's shutdown), the daemon aborts its writes and releases its
//     read locks at once, before it closes the socket, and counts the
//     connection closed and what the release freed. No heartbeat: an idle
//     connection that said hello is never reaped, and a dead one is found
//     by the kernel.
//   - No block is freed, reissued or evicted while a lease on it is live.
//     A delete with force, from any connection, drops the keys at once,
//     but a locked object's block stays allocated (in the quarantined
//     bytes) until every connection holding a lock on it has finished,
//     aborted, released or disconnected: a force-deleted write's
//     finish_write answers WRITE_DELETED and publishes nothing, a
//     force-deleted read's finish_read answers OK, and either way the
//     connection's record goes.
//   - What a peer can make the daemon hold is bounded (limits.go,
//     buffers.go, logger.go): connections in all and per uid
//     (TOO_MANY_CONNECTIONS), a spare descriptor to refuse with when the
//     daemon is out of them, the time to say hello (TIMEOUT), the frame
//     buffers all connections share (BUSY), and log lines per message per
//     second. A log write that fails is counted, never fatal.
//   - So is what one connection holds and sends (quota.go): its read
//     locks (Config.ConnReadLocks), the bytes its write reservations ask
//     for (ConnWriteBytes) and its frames (MaxFrame, TOO_LARGE and
//     closed). A call that would pass a hold limit is cut in request
//     order: the first keys are carried out as without the limit, the
//     rest answered OVER_LIMIT and not passed to l1, so nothing changes
//     for them, and the connection stays open.
//   - Lock TTLs stay, as the backstop for a client alive but stuck.
//   - Every request carries the pool's epoch, new at each start; a request
//     with another (leases from an earlier daemon) is refused with
//     WRONG_EPOCH and does nothing.
//   - Bad input (malformed, oversized, truncated or unknown frames, a wrong
//     version, half a frame then a stall) gets an answer with the code
//     that says why, then the connection is closed and released; other
//     connections are not affected.
//   - Check verifies, at any moment, that l1's locks and the ledgers agree:
//     every write-locked object has exactly one live connection holding
//     its write lease, every read lock is counted by a live connection,
//     the allocator's invariants hold and its used bytes are the objects'
//     blocks plus the quarantined ones.
//   - A restart keeps the cache when asked to: a daemon with Takeover takes
//     the pool, the socket and the index of finished objects from the one
//     serving (handoff.go), or with Systemd from systemd's fd store
//     (fdstore.go); the objects are served under a new epoch. Locks and
//     leases are not carried over as such, but no block under one is
//     given to another writer: the index holds each such block until its
//     lease would lapse (Config.RestartHold for a lease with no expiry),
//     since its client may still write or read it. An index it doubts is
//     never served: the
//     daemon starts cold and says why (Start). The daemon's own L2 work
//     stops before its index is taken: no prefetch writes into a block
//     and no copy to L2 reads one once the successor may reuse it; a
//     handoff that fails starts it again.
//
// wire/PROTOCOL.md is the protocol, byte by byte.
package server
