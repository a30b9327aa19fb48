// Package trace replays real serving traffic, traces in the Mooncake JSONL
// format, through l1 over the allocator on simulated time, and scores every
// l1 configuration by hit rate beside two allocator-free bounds of the same
// size: an ideal LRU and Belady's optimal offline policy. The command
// bench/cmd/trace runs it; make trace runs the sweep over pool sizes.
//
// # Input
//
// Parse and ReadFile read one JSON object per line: timestamp (ms),
// input_length and output_length (tokens) and hash_ids (the prompt's KV
// blocks in order, 512 tokens each by default; the last may be partial).
// Gzipped input is detected by its magic bytes. Every malformed line is an
// error wrapping ErrFormat that names the file and line; nothing is
// replayed from a file with one. Requests are replayed in timestamp order;
// hash ids are renumbered densely, so per-block state is a slice and there
// is no limit on requests or distinct blocks beyond memory.
//
// # The request model
//
// A request arriving at time t (its timestamp divided by Options.Rate):
//
//  1. Lookup: read-locks the longest prefix of its blocks that is resident
//     and readable (l1's AppendReadPrefix, one call that stops at the
//     first miss, so nothing behind the miss is locked or touched). Those
//     blocks are the hits. A block being written by another request is a miss.
//  2. Store: reserves every later block with one ReserveWrite in ModeNew
//     (AppendReserveWriteChain, its form that appends to a reused slice):
//     blocks that exist (resident behind the miss, or being written by an
//     earlier request) are left alone, the missing ones are allocated, and
//     on-demand eviction, if configured, runs inside that call (with
//     Scattered placement over a full pool, by handing the victims' blocks
//     to the new objects: allocator.Reissue).
//  3. Finish: after the modelled prefill, (input_length − hit tokens) ÷
//     Options.PrefillRate, FinishWrite commits the granted blocks and
//     FinishRead releases the hits. A block becomes readable only then.
//
// Finishes and the periodic controller's ticks wait in a sim.Queue keyed
// by simulated time; at one instant sweeps run first, then finishes, then
// arrivals in trace order. l1's Config.Now is the simulated clock
// (sim.Clock), so lock lifetimes run on it.
//
// The l1 replay (l1sim.go) calls l1 directly. Each reservation's leases
// are kept for its finish, and the store passes the chain position of its
// blocks when the prefix-aware eviction policy or the partial hint needs
// them.
//
// # Policies
//
// Policies is the table of l1 configurations, one report row each, a
// sim.Policy per row: on-demand eviction (l1's Config.EvictOnDemand) or
// the periodic controller (sim.Controller counting bytes: every SweepEvery
// of simulated time, at usage ≥ Watermark, EvictTo(usage × (1 −
// SweepRatio)), LMCache's 1 s poll evicting a fifth of the objects at
// 80 %), times placement scattered, contiguous-first or contiguous, and
// for scattered, l1's eviction policies. A new l1 knob is a sim.Policy
// field (see package sim) and new rows here. The rows ending in +partial
// pass l1.Partial for a request's last block when its tokens do not fill
// it (input_length < blocks × block tokens): the caller's dead-on-arrival
// hint, which l1 honours by evicting that block first (under S3-FIFO,
// first of its small queue).
//
// policylab_test.go (KVALLOC_POLICYLAB=1 go test -run PolicyLab) replays
// allocator-free models of candidate policies (LRU with the partial hint,
// segmented LRU, S3-FIFO fixed and adaptive, W-TinyLFU) under the bounds'
// request model, and computes a class+age bound: the most reuse hits any
// policy can reach that keeps a block for an age limit chosen per class
// (chain position, partial last block, later turn, use count) with
// hindsight of the trace's reuse gaps, under the pool's slot-time.
//
// The pool is Slots blocks of BlockSize bytes rounded up to the alignment,
// given as a fraction of the trace's distinct blocks or as bytes. The
// region is an anonymous mapping with MAP_NORESERVE (linux; a heap region
// elsewhere): address space, no memory, since neither the allocator nor
// the replay touches region memory. The block size does not change the
// outcome (all blocks have one size); the 64 KiB default keeps the
// conversation trace's pools at a few GiB of address space.
//
// # Bounds
//
// Both bounds have exactly Slots places, no allocator, no locks, and the
// same request model and definition of a hit: the longest resident prefix
// at arrival; a missing block is claimed at arrival and becomes resident
// when its request finishes. Simplifications, documented so that the gaps
// read right: in-flight blocks take no slot and a block a request is
// reading may be evicted. The ideal LRU (lruCache) is the textbook cache,
// a Go map and a linked list, with l1's recency rules: hits and finished
// writes become most recently used. Belady (beladyCache) evicts the block
// whose next use is furthest in the future, or does not admit the new
// block when its own next use is as far (ties: the deeper block goes
// first). MIN is optimal for independent references; with prefix hits it
// is a strong reference, not a proven optimum.
//
// # Metrics
//
// A Result gives, hit rate first: the block hit rate (hits ÷ block
// references) and the token hit rate (hit tokens ÷ input tokens, where a
// request whose every block hits counts its whole input_length, since the
// last block may be partial). Every miss is classified at arrival: cold
// (never stored before), eviction-induced prefill (stored before and evicted
// since: the blocks recomputed because eviction removed them), or orphan
// (still resident, but behind the request's first miss). For l1: keys
// requested, granted and answered OutOfMemory; ReserveWrite calls that
// failed, and those that failed while the allocator had the bytes for the
// whole call; allocator calls; evictions; mean and peak fragmentation
// (allocator.Stats.Fragmentation, 1 − largest free extent ÷ free bytes) and
// usage, sampled after every store. For every row: Busy, the wall time inside
// the cache's calls (l1 and the allocator, or the bound's structure), split
// by phase, and NsPerBlockOp, Busy per block reference; every row of a trace
// has the same references, so the ratio to the ideal LRU's is a ratio of
// times. Everything but the times is deterministic, and Sweep checks it by
// replaying each row several times.
package trace
