// Package scenario replays cache incidents, written as scenario files,
// against every L1 policy, deterministically, and reports what each policy
// did. The command bench/cmd/scenarios runs it; testdata/scenarios holds
// the scenarios and FORMAT.md, the file format.
//
// # What runs
//
// Run replays one Scenario under one sim.Policy: a fresh
// allocator.Allocator (allocator.New over hostmem.NewHeapRegion of the
// scenario's pool size) under a fresh l1.Manager[uint64] that
// sim.NewManager configures with the policy's prefix strategy, placement
// and control. The manager's Config.Now is the simulated clock
// (sim.Clock), which only advance and traffic operations move, so a run
// takes no real time beyond its work and is deterministic: the same file,
// policy and Options give the same Result, wall time aside. RunMatrix runs
// scenarios × policies on several goroutines (sim.Parallel); runs share
// nothing.
//
// The policy matrix (matrix.go) is prefix {none, binarysearch, onepass} ×
// placement {contiguous, scattered, contiguous-first} × eviction
// {periodic, on-demand}: 18 policies (Policies), named
// PREFIX/PLACEMENT/EVICTION after l1's, allocator's and sim's enums.
//
// # Operations
//
// Store, restore and reserve-write make one ReserveWrite call per request
// of their group; store then calls FinishWrite on the granted keys, and
// restore FinishWriteAndReserveRead, as an L2-to-L1 restore does. Between
// the two they write the granted blocks through allocator.Bytes: by default
// (FillEnds) only the first and last byte of each object, which reaches
// every object's memory at a cost that does not grow with object size;
// Options.Fill = FillFull writes every byte. The ops on a selection (read,
// reserve-read, finish-read, delete, touch, ...) make one call per selected
// request. Every l1 call's per-key statuses update a model of each object
// (size, finished, write-locked, read locks); l1's listener reports the
// removals l1 makes itself (evictions, expiries, temporary objects).
//
// Traffic runs seeded streams (math/rand/v2 PCG seeded with the scenario's
// seed and the stream's index): Poisson arrivals whose rate a square-wave
// burst multiplies; each arrival is a read of an earlier request (picked
// by recency rank from the reuse distribution) that holds its read locks
// for the stream's hold time, or a store of new chunks. The workload a
// stream generates does not depend on the policy: every policy sees the
// same requests at the same simulated times.
//
// Events (a sim.Queue) at one instant run in this order: plot samples,
// the periodic sweep, releases of held read locks, arrivals; an explicit
// operation at an instant runs after every event of that instant.
//
// # The periodic controller
//
// Under the periodic policies the runner plays LMCache's reference
// eviction controller, sim.Controller counting keys, configured by the
// sweep directive: every sweep period of simulated time (1 s), when used ÷
// capacity ≥ the watermark (0.8), it evicts the ratio (0.2) of the keys,
// least recently used first, walking past locked objects (see
// sim.Controller.Tick for how it asks l1's EvictTo for k keys). With one
// object size this evicts exactly k keys; with several sizes it evicts
// 20 % of the bytes.
//
// # What is reported
//
// A Result counts, over every ReserveWrite call that had keys to allocate:
// keys requested, granted and answered OutOfMemory; failed calls and those
// that failed while enough free bytes existed; and the oracle Ideal. The
// oracle is the sum over calls of min(n, ⌊(free + evictable) ÷ s⌋), where
// n keys of aligned size s were requested, free is the allocator's free
// bytes just before the call, and evictable the bytes of the objects l1
// may evict (finished, not temporary, holding no lock) not named in the
// call: what a policy could grant if it
// could evict every evictable object and place objects anywhere in the
// freed bytes. It is an upper bound (fragmentation can make it
// unreachable), so Granted ≤ Ideal, and GrantRatio = Granted ÷ Ideal (the
// table's grant/oracle column). It scores stores, not reads: ReadHits and
// ReadHitRate count the keys reads found resident. It also
// reports l1's allocator calls, probes and evictions, periodic sweeps,
// peak and mean fragmentation (allocator.Stats.Fragmentation, 1 − largest
// free extent ÷ free bytes, after every operation and traffic event), wall time, a Step per operation, and
// for plotted scenarios a time series of usage, failures and evictions.
//
// At the end of every run (and after every operation with Options.Check)
// the model is compared with l1's Snapshot and the allocator runs Verify,
// so a scenario whose model drifted from l1, such as one that holds a
// lock past its TTL, fails loudly instead of reporting a wrong oracle.
package scenario
