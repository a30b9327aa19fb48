// Package bench holds kvalloc's benchmarks. It has no API: everything here
// is a Benchmark run by `make bench`, plus the floors each result is judged
// against.
//
// A nanosecond figure on a shared two-core machine means little by itself,
// so every benchmark that matters is read as a ratio against a floor
// measured in the same run: the cheapest code that could do the same job.
// `make bench` runs the suite in rounds, so that a result and its floor see
// the same phases of the machine, and prints the ratios with their targets
// through bench/cmd/benchratio.
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
//     binarysearch is compared with onepass.
//   - L1Cycle/keys=N: ReserveWrite of N new keys, FinishWrite, ReserveRead,
//     FinishRead, and the Delete that frees them, so every op starts from
//     the same empty manager. Reports ns/key; compared with Floor/map.
//     L1CycleParallel runs the cycle on GOMAXPROCS goroutines, each on its
//     own 256 keys.
//   - Fill/region=R: copying a 32 MiB object from the Go heap into its
//     block. Reports GB/s; compared with Floor/copy.
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
// touched, in full, which is why they stay under 512 MiB. The L1 benchmarks
// use an untouched mmap pool, which, unlike a heap region of the same size,
// does not change how often the garbage collector runs.
//
// TestL1Allocs asserts the manager's allocation counts; the allocator's
// (0 for Allocate and Free) are asserted in package allocator.
package bench
