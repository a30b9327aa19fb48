// Package proptest holds kvalloc's property tests, written with
// github.com/leanovate/gopter. It has no API; its tests prove, for randomly
// generated states and operation sequences, that:
//
//   - TestPropAllocatorInvariants: the allocator, driven by random
//     sequences of Allocate, AllocateBatch, AllocateUpTo, Fit and Free
//     (valid and invalid blocks, blocks referred to by index), returns
//     exactly the blocks its documented placement policy gives, keeps its
//     invariants, accounts every byte, coalesces free extents, and changes
//     nothing on a failed call (a gopter commands test against a model
//     of the live blocks), and rejects replayed stale handles;
//     TestPropAllocatorInvariants8MiB runs it with 8 MiB-class objects in
//     batches of up to 6000 on a 44.5 GiB MAP_NORESERVE pool;
//   - TestPropPrefixMaximality: on any fragmentation and any mix of
//     existing keys, ReserveWrite grants exactly as many needing keys as
//     the memory can hold (the allocator's Fit, or one extent's share under
//     Contiguous placement), under every prefix strategy;
//   - TestPropRequestOrderLocking: the granted needing keys are exactly the
//     first k, in request order, each write-locked with a block of its own,
//     and no other key changed state;
//   - TestPropTailOOMStatuses: every later needing key gets OutOfMemory and
//     holds nothing;
//   - TestPropL1StateMachine: random sequences of every Manager method and
//     clock advances across both lock TTLs follow the reference model of
//     the L1 state machine, result for result (a gopter commands test; keys
//     are small integers, blocks are compared with the model's);
//   - TestPropL1Policies and TestPropL1MixedEviction: under every eviction
//     policy the manager evicts what the model of that policy evicts; the
//     second with objects of 1 to 3 units and on-demand eviction under
//     every placement and prefix strategy, where the victims must be
//     exactly those of the plain "free the next victim, then ask Fit" loop.
//     Seeds that once failed are replayed as fixed cases
//     (policy_regress_test.go);
//   - TestPropThroughDaemon and TestPropThroughDaemonL2: the ReserveWrite
//     properties again through kvallocd (one suite, three front ends), the
//     second with the daemon's L2 tier on over a real redis-server, pools
//     of 8 to 32 units and engine-like preparations (store, read, delete)
//     in which a read of a key L1 lost loads it back from L2; it counts
//     the cases that loaded from L2 and fails if none did.
//
// Each property is named after the contract it checks, so a failure says
// what broke, and each has a proof in bite_test.go: the same property run
// against a deliberately broken implementation (internal/reference/mutant)
// must fail. A property that cannot fail is a defect.
//
// # Seeds and sizes
//
// On failure a property prints its seed ("failed with initial seed: N")
// and the command line that replays it. These environment variables tune a
// run; the defaults keep `go test -race ./proptest/` well under a minute on
// two cores:
//
//	KVALLOC_PROP_SEED=N    replay with seed N (default: the clock)
//	KVALLOC_PROP_TESTS=N   successful cases each property needs (default per property)
//	KVALLOC_PROP_SIZE=N    maximum operations per case (default per property)
//
// For example, to replay a failure and then run a long search:
//
//	KVALLOC_PROP_SEED=1712345678 go test -run '^TestPropPrefixMaximality$' ./proptest/
//	KVALLOC_PROP_TESTS=20000 KVALLOC_PROP_SIZE=300 go test -run '^TestProp' -timeout 1h ./proptest/
package proptest
