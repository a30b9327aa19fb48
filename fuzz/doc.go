// Package fuzz holds kvalloc's native Go fuzz targets. It has no API; its
// tests are the point. Each target proves, for every input the fuzzer can
// build, that the real code agrees with a slow, obviously correct model in
// internal/reference after every single operation:
//
//   - FuzzAllocator: the allocator keeps every block in range, aligned and
//     disjoint from every other; its byte accounting adds up; its free
//     extents are exactly the maximal free runs (coalesced); a failed or
//     rejected call changes nothing; AllocateUpTo and Fit return the
//     model's maximum; invalid blocks are refused.
//   - FuzzReserveWrite: from a random starting state (fragmentation, keys
//     in every lock state), one ReserveWrite under each prefix strategy
//     grants the maximal prefix, locks keys in request order, gives the tail
//     explicit statuses, leaks no block and changes nothing when rejected.
//   - FuzzL1Lifecycle: random sequences of every Manager method and clock
//     advances across both TTLs follow the model's state machine.
//   - FuzzPrefixStrategies: on the same state, the one-pass and the
//     binary-search prefix grant the same k, and PrefixNone grants n or 0.
//
// Inputs are sequences of fixed-size binary records, decoded with
// encoding/binary and built by an encode helper that a round-trip test
// covers, as Go's internal/runtime/maps fuzz test does. Trailing bytes
// shorter than a record are ignored.
//
// Every check is a function over an interface, so the same check runs
// against the deliberately broken variants in internal/reference/mutant;
// the *Bites tests assert that the committed seed corpus makes every
// check fail on every variant it is meant to catch.
//
// Corpus: testdata/fuzz/<Target>/ holds the committed seeds, written by
// TestSeedCorpus from the named scenarios in the *_test.go files (run it
// with KVALLOC_UPDATE_CORPUS=1 to rewrite them), plus any minimized
// crasher, which keeps its hex name. Plain `go test` replays all of them.
package fuzz
