// Package bench holds kvalloc's benchmarks. It has no API: everything here
// is a Benchmark run by `make bench`, plus the floors each result is judged
// against.
//
// A nanosecond figure on a shared two-core machine means little by itself,
// so every benchmark that matters is read as a ratio against a floor
// measured in the same run: the cheapest code that could do the same job.
// `make bench` runs the suite in rounds (bench/run.sh), so that a result
// and its floor see the same phases of the machine, and prints the ratios
// with their targets through bench/cmd/benchratio.
//
// # Benchmarks
//
// The names are an interface: CI compares results by name, so renaming a
// benchmark silently drops it from the gate.
//
//   - Allocate/region=R: one Allocate and one Free of an 8 MiB block on an
//     otherwise empty 256 MiB pool: two locked calls. Compared with
//     Floor/mutex, which is one. R is heap, pinned (mmap + mlock) or
//     cuda-host; a region the machine refuses skips, with the reason.
//   - AllocateBatch/region=R/placement=P/n=N: a batch of N 64 KiB objects
//     and one Free of the whole batch, on a pool with room for the batch and
//     1/16 more. The batch goes through AppendBatch into a reused slice, so
//     the figure is the allocator's and not the Go heap's (AllocateBatch is
//     AppendBatch with a fresh slice: one allocation more, asserted by the
//     allocator's TestZeroAllocs). Reports ns/block; compared with
//     Floor/bump.
//   - AllocatorPool/object=O/pool=P/op=X: the allocator at production
//     sizes: objects of 16 KiB, 1, 8 and 40 MiB in pools of
//     45 GiB (5700 × 8 MiB) and 1 TiB, over MAP_NORESERVE mappings that
//     reserve address space without memory (they skip, with the reason,
//     where mmap or the reservation is unavailable). Batches are of 5700
//     objects, or as many as the pool holds. op=batch-warm is one
//     scattered AppendBatch on an allocator that served the same batch
//     before; op=batch-fresh the same batch as the first call after New;
//     op=free one Free of the batch, allocated as adjacent blocks; all
//     three report ns/block and are compared with Floor/bump (and fresh
//     with warm, 8 MiB with 16 KiB). op=pair is one Allocate and Free;
//     op=new (8 MiB rows) times New alone, which must not grow with the
//     pool. Whatever is not measured (the Free after a batch, the batch
//     before a Free, New and the region before a fresh batch) runs with the
//     timer stopped, so allocs/op does not depend on b.N.
//   - Fragmented/extents=E/op=O: a pool of 2E one-unit blocks with every
//     other one freed, so E equal free extents. op=single is one Allocate
//     and Free, which best fit serves from the lowest hole; op=batch is a
//     scattered batch of 16, one per hole, and its Free. extents=100000 is
//     compared with extents=1000: an O(log F) index keeps the ratio near 1,
//     a linear scan would make it 100.
//   - PrefixRecovery/strategy=S/n=5700: one ReserveWrite of 5700 new keys
//     into a pool with room for 4560; the AbortWrite that undoes it is not
//     timed. Reports probes/op, granted/op and alloc-ns/op, the time spent
//     inside the memory's calls, which is where the strategies differ.
//     PrefixRecovery/fit/n=4560 is a ReserveWrite of 4560 keys that fits:
//     onepass is compared with it (what finding the prefix costs on top),
//     and binarysearch's alloc-ns/op with onepass's (the allocator time of
//     the search; end to end both share the per-key work).
//   - L1Cycle/keys=N: ReserveWrite of N new keys, FinishWrite, ReserveRead,
//     FinishRead, and the Delete that frees them, so every op starts from
//     the same empty manager. Reports ns/key; compared with Floor/map.
//     L1Cycle/size=8MiB/keys=5700 is the production regime: 8 MiB objects
//     filling a 45 GiB MAP_NORESERVE pool. L1CycleParallel runs the cycle
//     on GOMAXPROCS goroutines, each on its own 256 keys.
//   - EvictOnDemand/victims=V: one ReserveWrite of 5700 new 8 MiB keys into
//     a full 45 GiB pool of 5700 evictable objects, so on-demand eviction
//     takes them all; the reordering between ops is not timed. adjacent
//     evicts in address order, scattered every other object first.
//     scattered is compared with adjacent. Reports ns/victim.
//   - EvictPastLocked/cold=C: a 16-key ReserveWrite and FinishWrite into a
//     full pool whose 100,000 coldest objects are unread temporary
//     (cold=temporary) or read-locked (cold=read-locked) and cannot be
//     evicted; each op evicts the 16 coldest of 1024 evictable objects.
//     Compared with cold=none, the 1024 alone: the policies hold evictable
//     objects only, so eviction never walks the rest.
//   - PolicyBatch/policy=P/op=O: a store batch of 57 chains of 100 keys,
//     named chain after chain (positions 0..99 each time), of 8 MiB
//     objects filling a 45 GiB MAP_NORESERVE pool. op=finish-write is its
//     FinishWrite (the ReserveWriteChain that re-locks it is not timed),
//     op=read its ReserveRead and FinishRead: each object joins the
//     policy once per op. policy=prefix is compared with policy=lru: the
//     prefix policy's ranking by position must cost O(1) per key on this
//     order too. Reports ns/key.
//   - Contention/op=X/procs=P: one hot path under b.RunParallel at
//     GOMAXPROCS P (1 and 2 in one run; the sub-benchmark sets it), at
//     production size (8 MiB objects, 45 GiB MAP_NORESERVE pool of 5700):
//     op=lookup is ReserveReadPrefix + FinishRead of one stored key,
//     op=store ReserveWrite + FinishWrite of one new key into the full
//     pool with on-demand eviction, op=allocate the allocator's Allocate +
//     Free of one block, op=mutex Floor/mutex on one shared mutex,
//     op=ceiling the same on a mutex per goroutine (nothing shared: the
//     machine's speed-up for a second goroutine in this run). Each
//     goroutine uses keys of its own. Reports ops/s; procs=2 ÷ procs=1 is
//     reported, without a bound (l1/DESIGN.md, "Contention").
//   - Fill/region=R: copying a 32 MiB object from the Go heap into its
//     block. Reports GB/s; compared with Floor/copy.
//   - SegmentPin/pin=P/workers=W: a 4 GiB segmented region of 64 MiB
//     segments, from its constructor until every segment is populated and
//     pinned (P: none, mlock or cuda) by W background workers, with an
//     allocator polling for its first 8 MiB block meanwhile. Reports
//     first-ns (to the first allocation), full-ns (to the whole pool) and
//     GiB/s. first-ns is compared with full-ns, and workers=2 GiB/s with
//     workers=1. A pin mode the machine refuses skips, with the reason.
//   - DaemonCycle/size=8MiB/keys=5700: L1Cycle's production cycle through
//     kvallocd (package server, in process) and its client (package
//     client) over a Unix socket: five frames each way, of up to 400 KB.
//     Reports ns/key; compared with L1Cycle/size=8MiB/keys=5700. Both also
//     report cpu-ns/key, the process's CPU time per key (every thread:
//     caller or client, manager or daemon, collector), whose ratio a
//     loaded machine disturbs less than the wall time's.
//   - DaemonRoundTrip/op=O: one round trip on one connection. op=ping is
//     the empty request and answer, the floor; op=reserve-finish a
//     one-key ReserveWrite of a new 4 KiB object and its FinishWrite. Both
//     report ns/rtt; reserve-finish is compared with ping.
//   - DaemonClients/clients=N: N connections at once, each cycling 32-key
//     batches (five calls) on keys of its own. Reports calls/s;
//     clients=8 ÷ clients=1 is reported, without a bound.
//   - DaemonFairness/flood=F/op=O: one connection's one-key calls
//     (ReserveRead and FinishRead in turn, each timed) while another sends
//     F-key frames back to back: op=read, a ReserveRead of 10,000 objects
//     and its FinishRead; op=write, a ReserveWrite of 10,000 new 4 KiB
//     objects and its AbortWrite (flood=0: no other connection). Reports
//     p50-ms and p99-ms, and the flood's frames/s; flood=10000's p99 is
//     held to 10 ms, and op=read's ratio to flood=0's is reported.
//   - DaemonManyClients/procs=P/clients=N: N connections from P processes
//     (this test binary again, see TestMain), each making one-key calls on
//     a key of its own, all at once. Reports p50-us and p99-us over every
//     call; procs=8/clients=64 ÷ procs=1/clients=1 at p99 is reported,
//     without a bound.
//   - PythonClient/client=C/op=X: the Python client (python/kvalloc, driven
//     by python/bench/driver.py in a process of its own) and the Go client
//     (C=python, go) on one daemon served in the benchmark's process, with
//     kvallocd's defaults and a 45 GiB pool that is never written.
//     op=cycle is L1Cycle's production cycle through the socket: 5700 keys
//     of 8 MiB reserved, finished, read-locked, released and deleted, every
//     status checked; the Python one makes one KeyBatch per cycle and
//     op=cycle-list passes the key list to every call instead. op=ping is
//     an empty round trip. The Python cycle is compared with the Go one
//     (target ≤ 2×), and Python's ping with Go's (its per-call overhead).
//     Skips where python3 ($PYTHON) is missing.
//
// # Floors
//
//   - Floor/bump: one bump-pointer allocation appended to a reused slice:
//     the least a batch can spend per block.
//   - Floor/mutex: a mutex lock, a bump and an unlock: the least any
//     thread-safe single allocation can spend.
//   - Floor/map: an insert, a lookup and a delete per key in a Go map keyed
//     by l1.ObjectKey, as the manager's is: the least a keyed index can
//     spend per key. Reports ns/key.
//   - Floor/copy: a heap-to-heap copy of 32 MiB: the bandwidth a Fill can
//     hope for. Reports GB/s.
//   - SegmentFloor/workers=W: a fixed amount of CPU work split among W
//     goroutines. workers=2 ÷ workers=1 is the parallel speed-up the
//     machine offers in this run, the ceiling for SegmentPin's.
//
// # Rules
//
// Setup (making regions, fragmenting pools, making keys) happens before
// b.Loop and is never timed. So is one warm-up op: the first op grows what
// later ops reuse (record chunks, index, scratch), and counted it would
// make allocs/op depend on b.N, which TestAllocsPerOpIndependentOfN
// forbids. The allocator never writes to its region, so
// the benchmarks only touch memory they mean to measure: heap and mmap pools
// stay virtual until Fill writes them, while pinned pools are locked, and so
// touched, in full, which is why they stay under 512 MiB; SegmentPin, whose
// point is pinning, pins 4 GiB, one pool at a time, released before the
// next. The L1 benchmarks use an untouched mmap pool, which, unlike a heap
// region of the same size, does not change how often the garbage collector
// runs.
//
// TestL1Allocs asserts the manager's allocation counts; the allocator's
// (0 for Allocate and Free) are asserted in package allocator.
package bench
