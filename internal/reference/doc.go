// Package reference holds, in its subpackages, slow, obviously correct
// models of kvalloc's layers, in the spirit of the Go runtime's
// SummarizeSlow: short enough to check by reading, too slow for anything
// but tests, each on the real package's own types. The allocator's unit
// tests, the fuzz targets and the property tests all diff the real code
// against them. Nothing outside the test harness imports them.
//
//   - allocref models package allocator: live blocks in address order,
//     the placement policy, and a diff of any allocator's view against it.
//   - l1ref models package l1's Manager over an allocref.Alloc, on l1's
//     types.
//   - baseline holds LMCache's two prefix strategies (binary search, all
//     or nothing) as l1.Memory wrappers, for the benchmarks, scenarios and
//     fuzz targets that compare them with l1's one pass.
//   - l1check runs a manager beside the l1ref model and states the
//     manager's contracts as checks; daemoncheck does the same for
//     kvallocd, with the model extended by connection ownership.
//   - mutant holds deliberately broken implementations that prove each
//     check bites.
package reference
