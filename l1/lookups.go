package l1

import "fmt"

// Lookup counters: what the calls that look keys up found, per call kind
// (Counters.Lookups), the figures an operator of a cache watches first.
//
// Each call counts its hits and misses in locals while it works and adds
// them to the manager's counters once, under the lock it already holds: no
// atomic, no allocation, a few adds per call (TestL1Allocs,
// BenchmarkL1Cycle).

// LookupKind names a kind of call that looks keys up, an index of
// Counters.Lookups.
type LookupKind uint8

const (
	// LookupRead is ReserveRead. A hit is a key it read-locked (OK); a
	// miss a key missing (KeyNotExist) or write-locked (KeyNotReadable).
	LookupRead LookupKind = iota
	// LookupReadPrefix is ReserveReadPrefix and AppendReadPrefix. The
	// hits are the keys of the prefix, locked; the miss, one per call
	// that stopped short, is the key it stopped at (missing or
	// write-locked); Skipped counts the keys behind that one, which the
	// call did not look at. So Hits/Calls is the mean prefix length, and
	// Hits/(Hits+Misses+Skipped) the share of the requested blocks
	// found.
	LookupReadPrefix
	// LookupUnsafeRead is UnsafeRead. A hit is a read-locked key.
	LookupUnsafeRead
	// LookupWrite is ReserveWrite and ReserveWriteChain: a hit is a key
	// that was already present when the call began (re-locked, or not
	// writable), which a store need not have sent; a miss is a key that
	// was missing (allocated, refused OutOfMemory, or KeyNotWritable in
	// ModeUpdate). A key repeated in the call counts like its first
	// occurrence.
	LookupWrite
	// NumLookupKinds is the number of kinds: the length of
	// Counters.Lookups.
	NumLookupKinds
)

// LookupKinds lists every kind, in Counters.Lookups' order.
var LookupKinds = []LookupKind{LookupRead, LookupReadPrefix, LookupUnsafeRead, LookupWrite}

var lookupKindNames = [...]string{
	LookupRead:       "read",
	LookupReadPrefix: "read_prefix",
	LookupUnsafeRead: "unsafe_read",
	LookupWrite:      "write",
}

// String returns "read", "read_prefix", "unsafe_read" or "write": the
// metrics' kind label.
func (k LookupKind) String() string {
	if k < NumLookupKinds {
		return lookupKindNames[k]
	}
	return fmt.Sprintf("LookupKind(%d)", uint8(k))
}

// LookupCounts are one kind of call's lookups: Calls, the calls that
// answered key by key (not those rejected, refused after Close, or failed
// by the memory), and the keys they named, by outcome (see LookupKind):
// Hits + Misses + Skipped in all.
type LookupCounts struct {
	Calls, Hits, Misses, Skipped uint64
}

// countLookupsLocked adds one call of kind k, with its hits, misses and
// skipped keys, to the counters.
func (m *Manager[K]) countLookupsLocked(k LookupKind, hits, misses, skipped int) {
	c := &m.stats.Lookups[k]
	c.Calls++
	c.Hits += uint64(hits)
	c.Misses += uint64(misses)
	c.Skipped += uint64(skipped)
}

// countPrefixLocked counts a prefix lookup of n keys that locked hits.
func (m *Manager[K]) countPrefixLocked(n, hits int) {
	miss := 0
	if hits < n {
		miss = 1
	}
	m.countLookupsLocked(LookupReadPrefix, hits, miss, n-hits-miss)
}
