// Kvallocd is the node daemon of kvalloc: one KV-cache host pool per node,
// shared by every engine process on it over a Unix-domain socket, where
// the connection owns the locks it takes.
//
// Usage:
//
//	kvallocd [flags]
//
// It creates the pool, a memfd (MFD_CLOEXEC, MFD_HUGETLB with -hugepages)
// sealed against shrinking and growing and mapped MAP_SHARED, populates
// it in the background segment by segment (pinning each with -mlock) and
// serves as soon as the first segment is ready; it runs one l1 manager
// over an allocator on it, and listens on -socket. A client (package
// client, or any client of wire/PROTOCOL.md) says hello, receives the
// memfd once and maps it: KV bytes never cross the socket.
//
// Peers are checked with SO_PEERCRED: a process whose uid is in
// -allow-uid or whose gid is in -allow-gid is served (by default the
// daemon's own uid only); anyone else is refused with a message naming its
// credentials, and the refusal is logged. When a connection ends, for any
// reason (a close, the client's SIGKILL, a malformed frame, a stalled
// frame), the daemon aborts its writes and releases its read locks at
// once. A stale socket from a dead daemon is replaced; a second daemon on
// a live socket refuses to start (the lock file -socket.lock).
//
// The socket lives where no other user can write. Its default is
// kvallocd.sock in /run/kvallocd/ for root, else in $XDG_RUNTIME_DIR, else
// in $TMPDIR/kvallocd-<uid>/ (/tmp without TMPDIR), a private directory the
// daemon creates with mode 0700 and refuses unless it is a real directory
// of its uid of mode 0700. Whatever the path, the daemon refuses to start
// when the socket's directory is owned by another non-root uid or writable
// by group or others, or lies under such a directory that is not sticky,
// and when the lock file is a symlink or another user's: another local
// user must not be able to take the path, the lock or the socket. A daemon
// that serves other uids (-allow-uid, -allow-gid) is run as root, or told a
// -socket in a directory they can reach. The clients check, before they
// send anything, that the process serving the socket runs as root or as
// their own uid (SO_PEERCRED; configurable in each client).
//
// What a peer can make it hold is bounded (wire/PROTOCOL.md, "Limits"): a
// connection past -max-conns, or past -max-conns-per-uid for its uid, or
// accepted when the daemon is out of file descriptors (it keeps a spare
// one for that), is answered TOO_MANY_CONNECTIONS and closed; one that
// says no hello within -hello-timeout is answered TIMEOUT and closed; an
// idle connection keeps two 16 KiB buffers, and larger frames and answers
// borrow from -buffer-budget bytes all connections share (a request that
// finds none within -frame-timeout is answered BUSY); each log message is
// written at most 20 times a second, the rest counted. Logging never ends
// the daemon: it ignores SIGPIPE, and a log line its stderr does not take
// (a reader gone) is counted in kvalloc_daemon_log_write_errors_total.
//
// With -metrics it serves /metrics (Prometheus) on that loopback address:
// the allocator's, the pool's, the manager's, per-connection gauges, and the Go
// runtime's.
// With -debug-verify as well, GET /debug/verify there runs the daemon's
// Verify (every lock held by a live connection, l1's counts against its
// objects, the allocator's invariants, used bytes equal to the objects'
// plus the quarantined) and answers what it found as JSON, and the
// metrics count the out-of-memory answers given while an evictable object
// was present (see server.Config.DebugVerify); make soak runs the daemon
// so. SIGTERM or SIGINT shuts it down cleanly: it stops accepting, releases
// every connection, closes the pool and removes the socket, and exits 0.
// SIGHUP (its terminal or session going away) is logged and ignored, and
// so is SIGPIPE (see the limits above).
//
// Restarting without losing the cache: with -takeover, a new kvallocd
// asks the one serving -socket for its pool over the handoff socket
// (-socket + ".handoff", mode 0600, both sides of the same uid). The old
// daemon stops accepting, ends every connection, and hands over the
// memfd, its listening socket and the index of its finished objects; the
// new one restores them, says it can serve, and serves the same objects
// on the same socket under a new epoch (and its own -socket-mode); the
// old one exits 0 once it does. Clients connect again. When nobody
// answers, or the index is doubtful (torn, stale, of another pool size or
// alignment), it starts cold and logs why. The pool size, alignment and
// huge-page setting must match the old daemon's. A handoff that fails
// (the new daemon dies, or cannot serve) leaves the old daemon serving,
// and a new daemon that did not take over exits 1. kvallocd exits 0 only
// on SIGTERM or SIGINT or once a successor serves its pool; any other end
// of serving exits 1.
//
// A restart (a handoff, or a stop under systemd's fd store) ends the
// connections, not the engine processes, which may still copy into or out
// of their blocks: no block under a live lease goes to another writer
// until its lease would have lapsed (-write-ttl, -read-ttl); a lease with
// no expiry is held for -restart-hold. See wire/PROTOCOL.md. The daemon's
// own L2 prefetches and copies stop before a handoff's export (a whole
// value's get or put in flight is waited for, up to -l2-timeout), and
// start again if the handoff fails.
//
// Under systemd (server.Config.Systemd, always on; it acts only on
// systemd's variables): with Type=notify it reports READY=1 once it
// serves; it keeps its memfd in the unit's fd store as "pool" and, on
// SIGTERM, after ending every connection (their leased blocks held, as
// at a handoff), the index as "index"
// (FDStoreMax=2 or more); started again with both in LISTEN_FDS, it
// restores them, with the same checks as a takeover. A crash leaves no
// fresh index: the next start is cold. A daemon that took over sends
// MAINPID= with READY=1, so that a unit with NotifyAccess=all and
// ExecReload=kvallocd -takeover (and the same flags) hands off on
// systemctl reload. A listening socket in LISTEN_FDS (a
// .socket unit, or systemd-socket-activate) is served instead of binding
// -socket, which must still name its path (the handoff socket is beside
// it); the file is systemd's and is left in place.
//
// A kvallocd built with -tags kvalloc_daemon_bugs is for tests only: it
// carries the one deliberate bug the environment variable
// KVALLOC_DAEMON_BUG names (forget-reads, leak-block, retain, error,
// no-evict, swap-blocks, keep-conn, close-error; see the server package's
// bugs.go), and logs a warning that it does; make soak-bites runs the
// soak against each. Any other build ignores the variable.
//
// Flags:
//
//	-socket path          the Unix socket (default /run/kvallocd/kvallocd.sock for root, else $XDG_RUNTIME_DIR/kvallocd.sock, else $TMPDIR/kvallocd-<uid>/kvallocd.sock)
//	-socket-mode mode     the socket file's mode, octal (default 0600)
//	-allow-uid list       uids served, comma-separated (default: the daemon's own)
//	-allow-gid list       gids served, comma-separated
//	-pool-size size       the pool: bytes, or with KiB, MiB, GiB, TiB (default 1GiB)
//	-align bytes          block alignment, a power of two (default 4096)
//	-hugepages            back the pool with hugetlbfs pages (MFD_HUGETLB)
//	-populate             fault the pool in, in the background, before serving each segment (default true)
//	-mlock                pin each segment once populated (RLIMIT_MEMLOCK)
//	-segment-size size    the unit of population (default 64MiB)
//	-placement p          scattered, contiguous-first or contiguous (default scattered)
//	-eviction e           lru, prefix or s3fifo (default prefix)
//	-evict-on-demand      evict when a reservation does not fit (default true)
//	-write-ttl d          write-lock lifetime, the backstop for a stuck writer (default 10m0s)
//	-read-ttl d           read-lock lifetime (default 5m0s)
//	-frame-timeout d      time from a frame's first byte to its last (default 10s)
//	-write-timeout d      time to write one answer (default 10s)
//	-conn-read-locks n    read locks one connection may hold (default 16384)
//	-conn-write-bytes n   bytes one connection's write reservations may ask for (default 64GiB)
//	-max-frame n          the largest request frame, 4KiB to 16MiB (default 16MiB)
//	-hello-timeout d      time from accept to the end of a connection's hello (default 10s)
//	-max-conns n          connections open at once, at most (default 1024)
//	-max-conns-per-uid n  connections open at once from one peer uid, at most (default 512)
//	-buffer-budget size   bytes of frame buffers all connections share, at least 20MiB (default 256MiB)
//	-metrics addr         serve /metrics on this loopback address, e.g. 127.0.0.1:9464
//	-debug-verify         for soaks: serve /debug/verify (the daemon's Verify, as JSON) with -metrics, and
//	                      count out-of-memory answers that left an evictable object (serializes reserve_write)
//	-restart-hold d       how long a restart keeps a block whose lease has no expiry (a -write-ttl that
//	                      never lapses, a lapsed write waiting for its writer) (default 10m0s)
//	-takeover             take the pool and its finished objects over from the kvallocd serving -socket;
//	                      start cold, and say why, when that fails
//	-log-level level      debug, info, warn or error (default info)
//	-version              print the module version (and the checkout's revision when built from one),
//	                      the Go toolchain and the protocol versions, and exit
//
// The L2 tier (docs/OPERATING.md, "Beyond one node"; every secret from a
// file of mode 0600 or 0400 owned by the daemon's uid or root, never argv):
//
//	-l2 url                  redis[s][+cluster|+plain]://[user@]host:port[,host:port...]: a Redis Cluster's
//	                         seeds or one plain Redis; rediss is TLS, user a Redis ACL user; a password,
//	                         database, query or fragment is refused (default: no L2)
//	-l2-secret-file path     the MAC secret every node shares, at least 32 bytes; required with -l2
//	-l2-secret-file-old path the previous MAC secret, read only, during a rotation
//	-l2-insecure-no-mac      run -l2 without a MAC secret: anyone who can write to the Redis can have its
//	                         bytes served as KV cache (logged as a warning)
//	-l2-password-file path   the Redis password, of the URL's user or the default user
//	-l2-tls-ca-file path     with rediss://: the CA certificates (PEM) the servers are checked against
//	                         (default: the system's roots)
//	-l2-tls-cert-file path   with rediss://: the client certificate (PEM) to present
//	-l2-tls-key-file path    with rediss://: its key (PEM)
//	-l2-timeout d            bound of each L2 call (default 2s)
//	-l2-queue n              finished objects waiting for their copy to L2; past it a copy is dropped
//	                         and counted (default 1024)
//	-l2-put-batch n          objects per put of the copies to L2 (default 2)
//	-l2-put-workers n        puts of the copies in flight at once (default 8)
//	-l2-batch n              keys per prefetch get (default 8)
//	-l2-batch-bytes size     a prefetch get takes more keys while their payloads fit (default 64MiB)
//	-l2-breaker-failures n   failed L2 calls in a row that open the circuit breaker (default 5)
//	-l2-breaker-cooldown d   how long the open breaker skips L2 (default 2s)
//	-l2-prefix s             prefix of every L2 name (default kvl2:)
//	-l2-max-prefetch n       keys being loaded from L2 at once, over all lookups (default 4096)
//	-l2-min-rate GB/s        an L2 hit's break-even; while the measured load rate is below it, lookups
//	                         count L2 hits as misses; 0 counts every hit (default 0.70272)
//	-l2-probe-interval d     while no L2 hit pays, how often one lookup's first batch loads anyway (default 1s)
//	-l2-piece-size size      store each object as pieces of this size over every master, loaded into and
//	                         sent from the pool without a copy; 0: whole values (default 256KiB)
//
// Against a Redis that refuses its credentials at start (NOAUTH,
// WRONGPASS, NOPERM) the daemon does not start: exit 1, with a log line
// that names -l2-password-file. Later refusals are counted
// (kvallocd_l2_auth_failures_total) and logged.
//
// It installs with go install github.com/kvalloc/kvalloc/cmd/kvallocd@latest
// (Linux only); kvallocd -version then names the module version installed.
//
// Exit status: 0 after a clean shutdown, a handoff to a successor or
// -version, 1 when the daemon cannot start
// or stops on an error, 2 for bad flags.
package main
