package mutant

import (
	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
)

// The broken variants above, packaged as l1check Variants: each builds an
// L1 system with one bug.
var (
	// VariantUpToOneShort runs the manager over an UpToOneShort memory.
	VariantUpToOneShort = l1check.Variant{Memory: func(a *allocator.Allocator) l1.Memory { return UpToOneShort{Allocator: a} }}
	// VariantOOMMiddle wraps the manager in OOMMiddle.
	VariantOOMMiddle = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return OOMMiddle[l1check.Key]{Manager: m}
	}}
	// VariantRepeatAllocTwice wraps the manager in RepeatAllocTwice.
	VariantRepeatAllocTwice = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], a *allocator.Allocator) l1check.Manager {
		return RepeatAllocTwice[l1check.Key]{Manager: m, Mem: a, Placement: m.Config().Placement}
	}}
	// VariantReversedPrefix wraps the manager in ReversedPrefix.
	VariantReversedPrefix = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return ReversedPrefix[l1check.Key]{Manager: m}
	}}
	// VariantTailNotWritable wraps the manager in TailNotWritable.
	VariantTailNotWritable = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return TailNotWritable[l1check.Key]{Manager: m}
	}}
	// VariantTruncateFlags wraps the manager in TruncateFlags.
	VariantTruncateFlags = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return TruncateFlags[l1check.Key]{Manager: m}
	}}
	// VariantRejectLate wraps the manager in RejectLate.
	VariantRejectLate = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return RejectLate[l1check.Key]{Manager: m}
	}}
	// VariantWritesNeverExpire configures WritesNeverExpire.
	VariantWritesNeverExpire = l1check.Variant{Config: WritesNeverExpire}
	// VariantReadsNeverExpire configures ReadsNeverExpire.
	VariantReadsNeverExpire = l1check.Variant{Config: ReadsNeverExpire}
	// VariantPrefixNoneIgnored runs PrefixNoneIgnored's strategy.
	VariantPrefixNoneIgnored = l1check.Variant{Strategy: PrefixNoneIgnored}
	// VariantLeasesIgnored wraps the manager in LeasesIgnored.
	VariantLeasesIgnored = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return LeasesIgnored[l1check.Key]{Manager: m}
	}}
	// VariantTTLOverflow configures TTLOverflow.
	VariantTTLOverflow = l1check.Variant{Config: TTLOverflow}
	// VariantReadPrefixLocksAll wraps the manager in ReadPrefixLocksAll.
	VariantReadPrefixLocksAll = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return ReadPrefixLocksAll[l1check.Key]{Manager: m}
	}}
	// VariantQuarantineFreesAtLapse configures QuarantineFreesAtLapse.
	VariantQuarantineFreesAtLapse = l1check.Variant{Config: QuarantineFreesAtLapse}
	// VariantQuarantineEvicted wraps the manager in QuarantineEvicted.
	VariantQuarantineEvicted = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return NewQuarantineEvicted(m)
	}}
	// VariantReadHitOnFind wraps the manager in ReadHitOnFind.
	VariantReadHitOnFind = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return NewReadHitOnFind(m)
	}}
	// VariantForceDeleteFreesAtOnce wraps the manager in
	// ForceDeleteFreesAtOnce.
	VariantForceDeleteFreesAtOnce = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return ForceDeleteFreesAtOnce[l1check.Key]{Manager: m}
	}}
	// VariantSharedKeys wraps the manager in SharedKeys.
	VariantSharedKeys = l1check.Variant{Manager: func(m *l1.Manager[l1check.Key], _ *allocator.Allocator) l1check.Manager {
		return NewSharedKeys(m)
	}}
)
