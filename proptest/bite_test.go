package proptest

import (
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// Proofs that the properties bite: each property, run against a
// deliberately broken implementation under a fixed seed, must fail. The
// seeds are fixed so the proofs are deterministic; any seed would do, since
// each bug shows up in most generated cases.

type bite struct {
	name string
	prop gopter.Prop
}

func assertFails(t *testing.T, cases []bite, tests, size int) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			failed, report := fails(c.prop, 1, tests, size)
			if !failed {
				t.Fatalf("the property passed on a broken implementation:\n%s", report)
			}
			t.Logf("caught:\n%s", report)
		})
	}
}

func TestPropAllocatorInvariantsBites(t *testing.T) {
	variant := func(f func(*allocator.Allocator) allocUnderTest) gopter.Prop { return commands.Prop(allocCommands(f)) }
	assertFails(t, []bite{
		{"AllocateUpTo grants one short", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.UpToOneShort{Allocator: a} })},
		{"Fit overstates by one", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.FitOneMore{Allocator: a} })},
		{"free extents never coalesce", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.NewNoCoalesce(a) })},
		{"failed batch leaks a partial grant", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.LeakOnFailure{Allocator: a} })},
		{"Free forgives a repeated block", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.FreeForgivesRepeats{Allocator: a} })},
		{"Contiguous batch scatters", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.ContiguousScatters{Allocator: a} })},
		{"Used off by one unit", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.UsedOffByOne{Allocator: a} })},
		{"stale handle accepted", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.NewStaleAccepted(a) })},
	}, 100, 80)
}

func TestPropAllocatorInvariants8MiBBites(t *testing.T) {
	r, err := hostmem.NewMmapRegion(largePool.capacity, hostmem.MmapOptions{NoReserve: true})
	if err != nil {
		t.Skipf("large pool unavailable: %v", err)
	}
	r.Close()
	variant := func(f func(*allocator.Allocator) allocUnderTest) gopter.Prop {
		return commands.Prop(allocCommandsIn(largePool, f))
	}
	assertFails(t, []bite{
		{"AllocateUpTo grants one short", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.UpToOneShort{Allocator: a} })},
		{"stale handle accepted", variant(func(a *allocator.Allocator) allocUnderTest { return mutant.NewStaleAccepted(a) })},
	}, 40, 40)
}

func TestPropPrefixMaximalityBites(t *testing.T) {
	assertFails(t, []bite{
		{"prefix granted one short", reserveProp(l1check.CheckPrefixMaximal, mutant.VariantUpToOneShort)},
	}, 300, 30)
}

func TestPropRequestOrderLockingBites(t *testing.T) {
	assertFails(t, []bite{
		{"OutOfMemory for a middle key", reserveProp(l1check.CheckRequestOrder, mutant.VariantOOMMiddle)},
		{"suffix granted instead of prefix", reserveProp(l1check.CheckRequestOrder, mutant.VariantReversedPrefix)},
	}, 300, 30)
}

func TestPropTailOOMStatusesBites(t *testing.T) {
	assertFails(t, []bite{
		{"tail answered KeyNotWritable", reserveProp(l1check.CheckTailOOM, mutant.VariantTailNotWritable)},
		{"OutOfMemory for a middle key", reserveProp(l1check.CheckTailOOM, mutant.VariantOOMMiddle)},
	}, 300, 30)
}

func TestPropL1StateMachineBites(t *testing.T) {
	assertFails(t, []bite{
		{"expired writes become readable", commands.Prop(l1Commands(mutant.VariantWritesNeverExpire))},
		{"expired temporary reads are never freed", commands.Prop(l1Commands(mutant.VariantReadsNeverExpire))},
		{"repeated key allocated twice", commands.Prop(l1Commands(mutant.VariantRepeatAllocTwice))},
		{"OutOfMemory for a middle key", commands.Prop(l1Commands(mutant.VariantOOMMiddle))},
		{"prefix granted one short", commands.Prop(l1Commands(mutant.VariantUpToOneShort))},
		{"mismatched flags truncated", commands.Prop(l1Commands(mutant.VariantTruncateFlags))},
		{"leases ignored", commands.Prop(l1Commands(mutant.VariantLeasesIgnored))},
		{"TTL overflow", commands.Prop(l1Commands(mutant.VariantTTLOverflow))},
		{"prefix read locks past the miss", commands.Prop(l1Commands(mutant.VariantReadPrefixLocksAll))},
		{"quarantine frees the block at lapse", commands.Prop(l1Commands(mutant.VariantQuarantineFreesAtLapse))},
		{"quarantined blocks evicted under pressure", commands.Prop(l1Commands(mutant.VariantQuarantineEvicted))},
		{"write-locked keys counted as read hits", commands.Prop(l1Commands(mutant.VariantReadHitOnFind))},
		{"forced delete frees a locked block at once", commands.Prop(l1Commands(mutant.VariantForceDeleteFreesAtOnce))},
	}, 150, 60)
}
