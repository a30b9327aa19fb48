// Package hostmem provides the regions of host memory that an
// allocator.Allocator carves: the Go heap, anonymous mmap, mlock-pinned and
// CUDA host memory, and a segmented region that is populated and pinned in
// the background and serves while it grows. It also reads the budget that
// says how large a pool fits on this machine and which limit binds.
//
// # Contract
//
//   - Every region is an allocator.Region: Bytes is the whole region, of
//     exactly the size asked for, zeroed at creation; Close releases the
//     memory, is idempotent and safe to call concurrently, and marks the
//     region's RegionState closed before it gives the memory back.
//   - Off-heap memory (mmap, pinned, segmented, CUDA host) is released by
//     Close and only by Close: there is no finalizer, because unmapping
//     memory a caller still reaches through a slice would be a
//     use-after-free the garbage collector cannot see. It must never hold Go
//     pointers; the allocator stores none.
//   - Nothing is touched that was not asked for: a NoReserve mmap region or
//     a segmented region reserves address space without memory, so a pool
//     of 1 TiB costs no RAM until it is written (or, for a segmented
//     region, until its workers populate it).
//   - Errors are clear and change nothing. A bad size or option wraps
//     ErrInvalidArgument before anything is mapped; memory the machine
//     cannot back, or a limit that refuses it, wraps ErrOutOfMemory and the
//     message names the limit in force (RLIMIT_MEMLOCK, the cgroup,
//     MemAvailable, the overcommit policy); a failure to give memory back
//     wraps ErrRelease. These match the allocator's sentinels of the same
//     name. A missing CUDA runtime, driver or device wraps
//     ErrCUDAUnavailable; a region kind this platform lacks wraps
//     ErrUnsupported.
//   - Platforms: the heap region works everywhere; the others need Linux.
//
// MEMORY.md beside this file describes each region, what it costs to
// create and touch, and how the segmented region builds a pool that is
// ready in seconds.
package hostmem
