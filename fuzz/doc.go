// Package fuzz holds kvalloc's native Go fuzz targets. It has no API; its
// tests are the point. Each target proves, for every input the fuzzer can
// build, that the real code agrees with a slow, obviously correct model in
// internal/reference after every single operation:
//
//   - FuzzAllocator: the allocator keeps every block in range, aligned and
//     disjoint from every other; its byte accounting adds up; its free
//     extents are exactly the maximal free runs (coalesced); a failed or
//     rejected call changes nothing; AllocateUpTo and Fit return the
//     model's maximum; invalid blocks are refused, stale handles (freed
//     blocks whose offset and size were handed out again) included; every
//     block carries the next generation.
//   - FuzzAllocatorLarge: the same checks at production size, 8 MiB-class
//     objects in batches of up to 6016 on a 44.5 GiB MAP_NORESERVE pool
//     (skipped where such a mapping is unavailable).
//   - FuzzReserveWrite: from a random starting state (fragmentation, keys
//     in every lock state), one ReserveWrite under each prefix strategy
//     grants the maximal prefix, locks keys in request order, gives the tail
//     explicit statuses, leaks no block, evicts on demand no object more
//     than the batch needs (objects of mixed sizes included, under every
//     placement) and changes nothing when rejected.
//   - FuzzL1Lifecycle: random sequences of every Manager method and clock
//     advances across both TTLs follow the model's state machine.
//   - FuzzPrefixStrategies: on the same state, the one-pass and the
//     binary-search prefix grant the same k, and all or nothing grants n
//     or 0 (LMCache's baselines, in internal/reference/baseline).
//   - FuzzFrameDecoder: any bytes, as a request and as an answer of
//     kvallocd's protocol (package wire): no panic, a refusal with a code
//     a decoder may give, and what is accepted well formed, re-encoded no
//     longer and decoded to the same message. Seeds: every message type.
//   - FuzzDaemonOwnership: three client connections to kvallocd (package
//     server, in process, over real sockets), random calls, disconnects and
//     clock advances, against the manager model extended with connection
//     ownership (daemoncheck.Owners): NOT_OWNER and OVER_RELEASE where the
//     model says, and after every step every object's state and the
//     daemon's Check (internal/reference/daemoncheck). With bit 1 of the
//     header's byte 3, the daemon has an L2 tier and the model its own
//     locks: the copies after each finish, the prefetches of lookups,
//     their loads, L2 evictions, and connections presenting the daemon's
//     leases.
//
// Inputs are sequences of fixed-size binary records, decoded with
// encoding/binary and built by an encode helper that a round-trip test
// covers, as Go's internal/runtime/maps fuzz test does. Trailing bytes
// shorter than a record are ignored, and so are the records past each
// target's bound on an input's cost (a cap on records, and for the L1
// targets a budget of units and keys), so that no input stalls a fuzz
// worker for more than about a second.
//
// Every check is a function over an interface, so the same check runs
// against the deliberately broken variants in internal/reference/mutant;
// the *Bites tests assert that the committed seed corpus makes every
// check fail on every variant it is meant to catch.
//
// # Running
//
// Plain `go test ./fuzz/` replays every committed input of every target, and
// runs the proofs that the checks bite. To fuzz, name exactly one target:
//
//	go test -run='^$' -fuzz='^FuzzReserveWrite$' -fuzztime=8h ./fuzz/
//	fuzz/run.sh 5m          # every target in turn, 5 minutes each (make fuzz)
//
// A failure writes the minimized input to testdata/fuzz/<Target>/<hex> and
// prints the command that replays it:
//
//	go test -run='^FuzzReserveWrite/<hex>$' -v ./fuzz/
//
// # Corpus
//
// testdata/fuzz/<Target>/ holds the committed inputs: named seeds, written
// by TestSeedCorpus from the scenarios in the *_seeds_test.go files (rerun
// it with KVALLOC_UPDATE_CORPUS=1 after changing a scenario; it fails while
// a file is stale), and minimized crashers, which keep their hex names and
// stay as regression tests. The inputs the fuzzer generates live in
// $GOCACHE/fuzz/github.com/kvalloc/kvalloc/fuzz/<Target>/ and are not
// committed.
package fuzz
