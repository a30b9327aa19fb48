// Package node measures what one kvallocd pool per node gains over a pool
// per engine process, on real traffic: a trace in the Mooncake format (the
// committed conversation trace) replayed through real daemons over their
// sockets. The command bench/cmd/nodebench runs it; make node-bench runs
// the full matrix and make bench a summary at one pool size.
//
// # What runs
//
// Every replay starts its daemons with package server (the socket server
// of cmd/kvallocd, in this process, each on its own memfd pool and Unix
// socket) and connects Engines clients with package client. One goroutine
// drives all the clients in the replay's order, one call at a time, so
// every outcome but the wall times is deterministic. The replay is
// bench/trace's (trace.RunDriver): the same request model, simulated
// clock (the daemons' l1.Config.Now), prefill model and metrics as its
// in-process l1 replay; this package supplies the Driver, whose steps are
// the clients' calls:
//
//   - lookup: each serving client's ReserveReadPrefix on the request's
//     keys, locking the longest readable prefix; every block it locked has
//     its stamp checked (the last StampBytes of the object, in the client's
//     own mapping of the pool);
//   - store: ReserveWriteChain in ModeNew on the blocks after the hits, with
//     the policy's chain positions (trace.Positions); a granted block gets
//     its stamp, a block that exists or that someone is writing answers
//     KEY_NOT_WRITABLE and is left alone;
//   - finish, when the prefill is done: FinishWrite of the granted blocks,
//     FinishRead of the hits.
//
// At the end the driver checks every daemon: nothing is locked, and
// server.Check finds its locks, ledgers and allocator in agreement.
//
// # Configurations
//
// DP (data parallelism): each request is routed to one of 8 engines,
// RoundRobin or BySession, and that engine's client serves it. TP (tensor
// parallelism of an MLA model, whose KV is the same on every rank): all 8
// ranks' clients serve every request, in rank order, under the same keys
// (Key: the block's, with no rank); in a shared pool the first rank to
// reserve a block writes it and the others find it, and the request's hits
// are the shortest prefix any rank found (RankSplits counts requests where
// they differ: none, when the ranks share keys). The pools (Pools) are
// Shared (one daemon of P blocks), Private (8 daemons of P/8, the same
// memory split) or Replicated (8 daemons of P: 8 times the memory, TP's
// baseline of bytes for the same data).
//
// P is a fraction of the trace's distinct blocks, as bench/trace defines
// it, of BlockBytes each: 512 tokens of Kimi K2's KV (see the constants).
// The pools are memfds that the daemons do not populate, so a pool of
// terabytes costs one page per block the replay ever wrote (its stamp).
//
// # Sessions
//
// The trace has no session id; Sessions derives conversations from shared
// hash-id prefixes (a chat's next turn resends the previous prompt), and
// documents the rule and its limits.
//
// # Metrics and checks
//
// A Result is the replay's trace.Result (block and token hit rates, cold
// and warm misses, grants and evictions summed over the daemons; the
// daemons cannot tell orphans from evicted blocks without changing
// recency, so warm misses all count as EvictPrefill) plus the node's: the
// used bytes and the distinct blocks held, sampled; the engines' load; the
// stamps checked. Sweep runs a Plan and fails unless every shared pool has
// exactly the Figures of bench/trace's in-process single engine with the
// same pool (SameAsSingle). The package's tests hold, on a prefix of the
// trace: determinism; shared = in-process single engine; private pools no
// better than the shared one under both routings; TP's shared pool holding
// the replicated pools' data in exactly 1/8 of their bytes; and stamps
// catching colliding keys. Each check is shown to fail against a broken
// variant (Variant and Routing hooks, filled by the package's tests).
//
// Report writes the TP and DP tables, the socket's cost per block
// reference, and the configuration it recommends to a serving engine
// (Recommend), as text or markdown, and the plot of hit rate against pool
// size. DESIGN.md beside this file gives the measured numbers.
package node
