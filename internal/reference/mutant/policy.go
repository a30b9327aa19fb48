package mutant

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// Broken eviction policies.

// HeadsFirst passes every ReserveWrite to ReserveWriteChain with the
// keys' positions reversed, the last key at position 0: the prefix-aware
// policy then ranks a chain's head as its tail and evicts heads first,
// orphaning the tails: resident, but past a missing head no lookup
// reaches them.
type HeadsFirst[K comparable] struct{ *l1.Manager[K] }

// ReserveWrite reserves with reversed chain positions.
func (m HeadsFirst[K]) ReserveWrite(keys []K, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	pos := make([]uint32, len(keys))
	for i := range pos {
		pos[i] = uint32(len(keys) - 1 - i)
	}
	return m.Manager.ReserveWriteChain(keys, pos, temporary, size, mode)
}

// EvictsLocked is an EvictTo that also takes an object that is not
// evictable, the least recently used locked one, as a victim.
type EvictsLocked[K comparable] struct{ *l1.Manager[K] }

// EvictTo evicts one locked object (removing it by force), then evicts as
// the manager does.
func (m EvictsLocked[K]) EvictTo(ratio float64) (int, error) {
	extra := 0
	if ratio >= 0 && ratio <= 1 {
		for _, e := range m.Snapshot() {
			if e.WriteLocked || e.ReadLocks > 0 {
				if st, err := m.Delete([]K{e.Key}, true); err == nil && st[0] == l1.OK {
					extra = 1
				}
				break
			}
		}
	}
	n, err := m.Manager.EvictTo(ratio)
	return n + extra, err
}

// S3FIFOIsLRU configures EvictS3FIFO to behave as EvictLRU: no small queue,
// so a scan of one-hit objects flushes the cache.
func S3FIFOIsLRU(c *l1.Config) {
	if c.Eviction == l1.EvictS3FIFO {
		c.Eviction = l1.EvictLRU
	}
}

// PrefixIsLRU configures EvictPrefix to behave as EvictLRU: heads first
// within each call.
func PrefixIsLRU(c *l1.Config) {
	if c.Eviction == l1.EvictPrefix {
		c.Eviction = l1.EvictLRU
	}
}

// PartialIgnored drops the Partial hint from every position passed to
// ReserveWriteChain: a partial block is then ranked as any other, so it is
// not the next victim.
type PartialIgnored[K comparable] struct{ *l1.Manager[K] }

// ReserveWriteChain reserves with the Partial bits cleared.
func (m PartialIgnored[K]) ReserveWriteChain(keys []K, positions []uint32, temporary []bool, size int64, mode l1.Mode) ([]l1.Result, error) {
	pos := make([]uint32, len(positions))
	for i, p := range positions {
		pos[i] = p &^ l1.Partial
	}
	if positions == nil {
		pos = nil
	}
	return m.Manager.ReserveWriteChain(keys, pos, temporary, size, mode)
}

// The broken policies as l1check Variants.
var (
	// VariantPartialIgnored wraps the manager in PartialIgnored.
	VariantPartialIgnored = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return PartialIgnored[l1check.Key]{Manager: m}
	}}
	// VariantHeadsFirst wraps the manager in HeadsFirst.
	VariantHeadsFirst = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return HeadsFirst[l1check.Key]{Manager: m}
	}}
	// VariantEvictsLocked wraps the manager in EvictsLocked.
	VariantEvictsLocked = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return EvictsLocked[l1check.Key]{Manager: m}
	}}
	// VariantS3FIFOIsLRU configures S3FIFOIsLRU.
	VariantS3FIFOIsLRU = l1check.Variant{Config: S3FIFOIsLRU}
	// VariantPrefixIsLRU configures PrefixIsLRU.
	VariantPrefixIsLRU = l1check.Variant{Config: PrefixIsLRU}
)

// MergeBlind is the allocator with a FreeAround that reports no free
// neighbour: on-demand eviction then counts each victim's block alone, as
// the manager once counted a victim's block it kept live for reuse, and
// misses the merges that make room for more objects than the parts held.
// With objects of mixed sizes the count comes out low and eviction takes
// a victim more than the batch needs (on free [0,1) with victims of 3, 2
// and 3 units and a batch of two 3-unit objects: all three, where the
// first two leave [0,6)).
type MergeBlind struct{ *allocator.Allocator }

// FreeAround reports nothing free around b.
func (MergeBlind) FreeAround(allocator.Block) (before, after int64) { return 0, 0 }

// VariantMergeBlind runs the manager over a MergeBlind memory.
var VariantMergeBlind = l1check.Variant{Memory: func(a *allocator.Allocator) l1.Memory { return MergeBlind{a} }}
