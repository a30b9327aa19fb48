// Kvallocsoak is the soak of kvallocd: a real daemon process, 8 client
// processes replaying the Mooncake conversation trace through it in a
// loop as a serving engine's connector does, one cycle in 20 ended by a
// SIGKILL at a random point and the client restarted, for minutes or
// hours, with the daemon's figures checked and printed every minute.
// make soak runs it (SOAK=10m by default).
//
// Usage:
//
//	kvallocsoak -daemon PATH [flags] TRACE
//
// TRACE is a trace in the Mooncake JSONL format, gzipped or not (make
// soak passes testdata/traces/mooncake-conversation.jsonl.gz); PATH is a
// kvallocd binary.
//
// # The daemon
//
// kvallocd runs as a subprocess with on-demand eviction, the prefix-aware
// policy and scattered placement (its defaults), -populate=false and
// -debug-verify, on a socket in a temporary directory, its metrics on a
// free loopback port. The pool is sized as bench/trace sizes it: -pool
// (0.1) of the trace's distinct blocks, each -object bytes (8 MiB)
// rounded up to the alignment: 18,279 blocks, 143 GiB, for the
// conversation trace. The pool is a memfd that costs nothing until
// touched, and the clients touch only the stamps at the two ends of each
// object (two pages), so RAM grows by at most 8 KiB per block, 143 MiB in
// all: the memfd's touched pages (the touched column), counted in the
// clients' RSS; the daemon never touches the pool.
//
// # The clients
//
// The -clients (8) client processes (this binary in its client role) take
// the trace's requests in arrival order from a shared counter, each the
// next one when it is free, as a load balancer hands each arrival to a
// free engine: together they replay the trace in order, in a loop, as
// fast as they can, with no pacing and no think time. Each request is what an engine's
// connector does for one prompt of blocks b0, b1, ...: reserve_read_prefix
// (one lock each) of its blocks; check the stamps of the hits under their
// read locks; finish_read; reserve_write, in mode new, of the blocks after
// the hits, with their chain positions and the Partial bit on a partial
// last block (l1.Partial); write the stamps of the blocks granted;
// finish_write. A block's stamps (64 bytes at each end of the object) are
// a function of its key, so any client can check a block any other wrote.
// A key is the block's dense number in the trace; the loop replays the
// same keys again.
//
// A cycle is -cycle (100) consecutive requests of one client. At the
// start of each, the client decides, with probability 1/-kill-every
// (1/20), that this cycle ends by SIGKILL, and draws its kill point
// uniformly: a request of the cycle and a step of that request (before
// reserve_read_prefix, holding read locks, before finish_read, before
// reserve_write, holding write reservations, before finish_write, done).
// There it asks the supervisor, with a byte on a pipe, and carries on;
// the supervisor's SIGKILL lands wherever the client has got to by then
// (mid-frame, holding read locks, between reserve_write and finish_write,
// ...; the summary counts kills by the phase the client was in when it was
// sent). The supervisor then starts a new process in the seat, which
// dials again and resumes at the request the dead one was doing. Every
// call's error other than by a per-key status,
// every status a connector does not expect (anything but OK,
// KEY_NOT_WRITABLE and OUT_OF_MEMORY from reserve_write, a non-OK status
// from a finish, a prefix answer that is not OK up to its length), every
// wrong stamp, and any exit that is not the supervisor's SIGKILL fails the
// soak. OUT_OF_MEMORY is a status, counted and not failed on.
//
// # The checks
//
// Every -verify-every (5 s) the soak asks the daemon's /debug/verify,
// which runs, with every request held off, its Verify: every write lock
// and read lock is recorded by an open connection, l1's counts match its
// objects, blocks lie in the pool and do not overlap, the allocator's
// Verify passes, and its used bytes equal the live objects' (held plus
// quarantined). Every minute it prints a row (see below). The soak fails
// at once when:
//
//   - a Verify finds anything, or used bytes differ from held plus
//     quarantined;
//   - the daemon's RssAnon passes its bound: its peak over the samples
//     from the start until -warmup (30 s) after the pool first filled (the
//     first eviction; about 2 s in at the soak's rates), plus -rss-slack
//     (64 MiB). The bound holds from then to the end. Why that bound: once
//     the pool is full, the daemon's structures are at their steady size.
//     l1's objects are bounded by the pool's blocks (18,279), the ledgers
//     by the locks of one request per client, the connections by the
//     clients, the record of closed connections by 4096. What still varies
//     is garbage between collections (up to the live heap again under
//     GOGC=100, about 20 MiB here) and the frame buffers (a 247-block
//     request is 20 KB): well under 64 MiB, which is 2.5 times the warm
//     RssAnon of about 27 MiB. A leak of 100 bytes per call grows by
//     about 1 MiB a second at the soak's 10,000 calls a second, and
//     passes the bound within about a minute; in CI's 60 s run, with about
//     28 s of it bounded, a leak of about 200 bytes per call or more.
//     Only RssAnon is bounded: the daemon never touches the pool, whose
//     pages the clients touch (the stamps') are shared memory, counted in
//     the clients' RSS and in the touched column;
//   - a reserve_write is answered OUT_OF_MEMORY while an evictable object
//     it could have taken was present (the daemon judges that under
//     -debug-verify: see below);
//   - a client fails, as above, or the daemon exits.
//
// At the end the clients are told to stop and exit 0 after their current
// request (within 30 s); the soak checks that every client's connection
// closed (within 5 s), nothing is locked and used bytes equal held bytes,
// then stops the daemon with SIGTERM and expects exit 0 within 60 s.
//
// Every check is shown to fail: TestSoakBites (make soak-bites, about a
// minute and a half) runs the soak against kvallocd built
// with server's kvalloc_daemon_bugs tag, one deliberate bug per check (a
// dead connection's read locks forgotten, a block leaked per disconnect,
// every request's keys retained, a reserve_read_prefix that errs, an
// OUT_OF_MEMORY answer without eviction, two hits answered with each
// other's blocks, a disconnect gone unnoticed, a SIGTERM that exits 1),
// and expects each to fail it with its own message, the first six within
// 60 s.
//
// # Allocation failures per hour
//
// An allocation failure with evictable objects present is a reserve_write
// call answered with at least one OUT_OF_MEMORY key while the daemon held
// an evictable object (finished, no lock) not named in the call with a
// block at least the call's size. kvallocd -debug-verify judges every
// such answer before any other request runs (the reserve_write holds the
// gate exclusively) and counts it (kvalloc_daemon_oom_evictable_calls_total,
// /debug/verify's oom_calls_evictable). The soak reports them per hour of
// soak, beside every OUT_OF_MEMORY call per hour, and beside the 200k–600k
// allocation failures a day (8,333–25,000 an hour) that LMCache's L1
// logged on one production server. The target is 0.
//
// # Output
//
// One row per minute (and one for a last, partial minute): the calls
// answered, requests done, block hit rate, keys granted by reserve_write,
// OUT_OF_MEMORY keys, evictions, kills, read locks and writes released
// because their connection ended, the daemon's VmRSS, RssAnon and
// RssShmem (/proc/PID/status), its Go heap in use
// (go_memstats_heap_inuse_bytes from /metrics), the allocator's used
// bytes against the live objects' (held + quarantined), the Verify runs
// of the minute and their failures, and the allocation failures with
// evictable objects present. Then the totals, the rates per hour and the
// kills by phase, and PASS or FAIL with the reasons.
//
// Flags:
//
//	-daemon PATH        the kvallocd binary (required)
//	-duration D         how long the clients run (default 10m)
//	-clients N          client processes (default 8)
//	-cycle N            requests per cycle (default 100)
//	-kill-every N       one cycle in N ends by SIGKILL; 0 kills none (default 20)
//	-pool P             the pool: a fraction of the trace's distinct blocks, or a size such as 40GiB (default 0.1)
//	-object SIZE        bytes per object, e.g. 8MiB (default 8MiB)
//	-verify-every D     period of the daemon's Verify (default 5s)
//	-minute D           the period of a row (default 1m; tests shorten it)
//	-warmup D           how long after the pool first fills RssAnon may still rise (default 30s)
//	-rss-slack SIZE     RssAnon allowed above its warm value (default 64MiB)
//	-seed N             the kills' and the clients' seed (default: from the clock)
//	-v                  the daemon's log and the clients' stderr on failure, in full
//
// Exit status: 0 when the soak passes, 1 when it fails, 2 for bad flags.
package main
