// Package cluster measures what a shared L2 tier adds to N nodes that each
// run their own kvallocd pool: a replay of serving traces (the Mooncake
// conversation trace, and trace shapes such as
// testdata/scenarios/shared-prefix.shape, whose prompts share segments
// across conversations) with data-parallel routing across the nodes,
// round-robin and by conversation (bench/node's routings). The command
// bench/cmd/clusterbench runs it; make cluster-bench runs the issue's
// sweep.
//
// # The model
//
// Run replays a trace through an in-process model of the cluster, on
// bench/trace's request model, simulated clock and prefill model
// (trace.RunDriver: a request holds its blocks for its missed tokens ÷
// the prefill rate). Each node's l1 is an LRU of L1 blocks with the rules
// of bench/trace's ideal LRU (a hit and a finished write become most
// recently used; a block being written is present but not readable and
// takes no place), so one node without L2 is exactly that bound. The L2
// is an LRU of L2 blocks, what Redis's maxmemory-policy allkeys-lru
// approximates (Redis samples keys; the model is exact). A request's
// lookup on its node takes the longest prefix readable in the l1, then
// the blocks right after it that L2 holds: each read from L2 (an L2 hit,
// which refreshes its recency there) and inserted into the l1, as the
// daemon's prefetch loads it into the node's pool. Its store claims the
// blocks that are missing from the l1; its finish commits them.
//
// The write policies (WritePolicy): WriteThrough puts every block a node
// computed to L2 when its request finishes; WriteBack puts a block the
// node computed when its l1 evicts it (a block loaded from L2 is clean);
// WriteBoth does both. A put of a block L2 holds refreshes it, as a SET
// does.
//
// # The sweep
//
// Sweep runs a Plan: for every N and routing, the isolated nodes (no L2);
// for every N, Q (a multiple of one node's l1) and routing, the nodes
// with L2 under every write policy; and for every N and Q the ideal
// bound, bench/trace's ideal LRU of N × L1 + Q blocks (one pool holding
// everything, no routing). Report's tables give block hit rates and
// prefill tokens beside the bound, and the blocks and bytes moved to and
// from L2 per hit; Judge picks the write policy with the best mean hit
// rate (the default to recommend) and states each trace's distance to the
// bound (the target, TargetGap, is 1 pp) and gain over isolated nodes.
//
// Plan.Replay replaces the model for the nodes' replays (the ideal bound
// stays bench/trace's), so that a replay through real daemons over a
// real Redis Cluster runs the same sweep; Agree compares two sweeps cell
// by cell and fails beyond a tolerance (DefaultTolerance).
//
// # Does an L2 hit beat recomputing?
//
// BreakEvenTable puts the time to load one block's KV from L2, at a
// measured (MeasureRedis: one local redis-server, redis-benchmark) or
// stated bandwidth per value size, beside the replay's prefill time for
// the same tokens. A block of k tokens is k × (KV bytes per token) bytes
// and k ÷ (prefill rate) seconds of prefill, so the break-even bandwidth,
// BreakEven, is the KV bytes per token × the prefill rate, whatever the
// block's tokens; the value size matters through Redis's throughput,
// which falls for large values.
//
// DESIGN.md beside this file gives the design and the measured numbers.
package cluster
