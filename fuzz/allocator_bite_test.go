package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/allocref"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
)

// TestFuzzAllocatorBites runs FuzzAllocator's checker over the committed
// corpus against each broken allocator and asserts that some seed makes the
// check fail for the right reason. A variant that survives means the target
// cannot catch its bug.
func TestFuzzAllocatorBites(t *testing.T) {
	seeds := corpus(t, "FuzzAllocator")
	variants := []struct {
		name  string
		build func(*allocator.Allocator) allocatorUnderTest
		want  string // a phrase of the error the check must report
	}{
		{"AllocateUpTo grants one short", func(a *allocator.Allocator) allocatorUnderTest { return mutant.UpToOneShort{Allocator: a} }, "the maximum is"},
		{"Fit overstates by one", func(a *allocator.Allocator) allocatorUnderTest { return mutant.FitOneMore{Allocator: a} }, "the maximum is"},
		{"free extents never coalesce", func(a *allocator.Allocator) allocatorUnderTest { return mutant.NewNoCoalesce(a) }, "free"},
		{"failed batch leaks a partial grant", func(a *allocator.Allocator) allocatorUnderTest { return mutant.LeakOnFailure{Allocator: a} }, "changed"},
		{"Free forgives a repeated block", func(a *allocator.Allocator) allocatorUnderTest { return mutant.FreeForgivesRepeats{Allocator: a} }, "invalid block"},
		{"Contiguous batch scatters", func(a *allocator.Allocator) allocatorUnderTest { return mutant.ContiguousScatters{Allocator: a} }, "out of memory"},
		{"stale handle accepted", func(a *allocator.Allocator) allocatorUnderTest { return mutant.NewStaleAccepted(a) }, "want one wrapping allocator: invalid block"},
		{"Used off by one unit", func(a *allocator.Allocator) allocatorUnderTest { return mutant.UsedOffByOne{Allocator: a} }, "!= capacity"},
		{"Reissue keeps the generation", func(a *allocator.Allocator) allocatorUnderTest { return mutant.ReissueKeepsGeneration{Allocator: a} }, "Reissue"},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for _, s := range seeds {
				a, err := newFuzzAllocator()
				if err != nil {
					t.Fatal(err)
				}
				err = checkAllocatorOps(v.build(a), decodeAllocOps(s.data))
				a.Close()
				if err != nil && strings.Contains(err.Error(), v.want) {
					t.Logf("caught by seed %s: %v", s.name, err)
					return
				}
			}
			t.Fatalf("no seed of FuzzAllocator makes the check report %q for this variant", v.want)
		})
	}
}

// TestFuzzAllocatorLargeSeeds checks that FuzzAllocatorLarge's seeds run at
// production scale (the pool full of 5700 8 MiB blocks) and that the large
// target catches a stale handle accepted, as the small one does.
func TestFuzzAllocatorLargeSeeds(t *testing.T) {
	newLarge := func(t *testing.T) *allocator.Allocator {
		r, err := hostmem.NewMmapRegion(largeGeometry.capacity, hostmem.MmapOptions{NoReserve: true})
		if err != nil {
			t.Skipf("large pool unavailable: %v", err)
		}
		a, err := allocator.New(r, allocator.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	seeds := corpus(t, "FuzzAllocatorLarge")
	peak := 0
	for _, s := range seeds {
		c := &allocChecker{g: largeGeometry, a: newLarge(t), ref: allocref.NewAlloc(largeGeometry.capacity, largeGeometry.align)}
		for i, op := range decodeAllocOps(s.data) {
			if err := c.step(op); err != nil {
				t.Fatalf("seed %s op %d: %v", s.name, i, err)
			}
		}
		peak = max(peak, c.peak)
	}
	if peak < 5700 {
		t.Fatalf("the large seeds hold at most %d blocks live, want a full pool of 5700", peak)
	}
	for _, s := range seeds {
		a := newLarge(t)
		err := checkAllocatorOpsIn(mutant.NewStaleAccepted(a), largeGeometry, decodeAllocOpsIn(s.data, largeGeometry))
		if err != nil && strings.Contains(err.Error(), "want one wrapping allocator: invalid block") {
			t.Logf("stale handle accepted caught by seed %s: %v", s.name, err)
			return
		}
	}
	t.Fatal("no large seed catches a stale handle accepted")
}
