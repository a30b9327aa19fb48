// Package mutant holds deliberately broken variants of kvalloc's allocator
// and L1 manager, one bug each, for tests only. Each variant wraps a correct
// implementation and breaks one contract the package docs state, the way the
// reference system (LMCache) broke it: an estimate that stops below the
// maximum, a leak from repeated keys, a tail given the wrong status, extents
// that are never merged.
//
// The fuzz and property tests run their checks against these variants and
// assert that the checks fail: a check that passes on a broken variant
// cannot catch the bug it was written for. Nothing outside tests imports
// this package, and it imports nothing of bench: a benchmark's broken
// variants live in that benchmark's tests (TestImportsFlowDownward).
package mutant
