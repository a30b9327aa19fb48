package fuzz

import (
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
	"github.com/kvalloc/kvalloc/l1"
)

// Broken variants of the L1 system, each with one bug.
var (
	upToOneShort = l1check.Variant{Memory: func(a *allocator.Allocator) l1.Memory { return mutant.UpToOneShort{Allocator: a} }}
	oomMiddle    = l1check.Variant{Manager: func(m *l1.Manager[int], _ *allocator.Allocator) l1check.Manager {
		return mutant.OOMMiddle[int]{Manager: m}
	}}
	repeatTwice = l1check.Variant{Manager: func(m *l1.Manager[int], a *allocator.Allocator) l1check.Manager {
		return mutant.RepeatAllocTwice[int]{Manager: m, Mem: a, Placement: m.Config().Placement}
	}}
	reversedPrefix = l1check.Variant{Manager: func(m *l1.Manager[int], _ *allocator.Allocator) l1check.Manager {
		return mutant.ReversedPrefix[int]{Manager: m}
	}}
	tailNotWritable = l1check.Variant{Manager: func(m *l1.Manager[int], _ *allocator.Allocator) l1check.Manager {
		return mutant.TailNotWritable[int]{Manager: m}
	}}
	truncateFlags = l1check.Variant{Manager: func(m *l1.Manager[int], _ *allocator.Allocator) l1check.Manager {
		return mutant.TruncateFlags[int]{Manager: m}
	}}
	writesNeverExpire = l1check.Variant{Config: mutant.WritesNeverExpire}
	readsNeverExpire  = l1check.Variant{Config: mutant.ReadsNeverExpire}
	prefixNoneIgnored = l1check.Variant{Config: mutant.PrefixNoneIgnored}
)

// everywhere applies v under every prefix strategy.
func everywhere(v l1check.Variant) variants {
	return func(l1.PrefixStrategy) l1check.Variant { return v }
}

// only applies v under strategy s and the real system elsewhere.
func only(s l1.PrefixStrategy, v l1check.Variant) variants {
	return func(t l1.PrefixStrategy) l1check.Variant {
		if t == s {
			return v
		}
		return l1check.Variant{}
	}
}

type l1Bite struct {
	name string
	v    variants
	want string // a phrase of the error the check must report
}

// bites runs check over target's committed corpus with each broken variant
// and asserts that some seed makes it report the expected failure.
func bites(t *testing.T, target string, check func(l1check.Setup, []l1check.Op, variants) error, cases []l1Bite) {
	seeds := corpus(t, target)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, s := range seeds {
				setup, ops := decodeL1Ops(s.data)
				if err := check(setup, ops, c.v); err != nil && strings.Contains(err.Error(), c.want) {
					t.Logf("caught by seed %s: %v", s.name, err)
					return
				}
			}
			t.Fatalf("no seed of %s makes the check report %q for this variant", target, c.want)
		})
	}
}

// TestFuzzL1LifecycleBites proves FuzzL1Lifecycle's checker fails on each
// broken manager.
func TestFuzzL1LifecycleBites(t *testing.T) {
	bites(t, "FuzzL1Lifecycle", checkL1Lifecycle, []l1Bite{
		{"expired writes become readable", everywhere(writesNeverExpire), "model"},
		{"expired temporary reads are never freed", everywhere(readsNeverExpire), "model"},
		{"repeated key allocated twice", everywhere(repeatTwice), "leak"},
		{"OutOfMemory for a middle key", everywhere(oomMiddle), "request-order locking"},
		{"prefix granted one short", everywhere(upToOneShort), "prefix maximality"},
		{"mismatched flags truncated", everywhere(truncateFlags), "ErrInvalidArgument"},
	})
}

// TestFuzzReserveWriteBites proves FuzzReserveWrite's checker fails on
// each broken manager, and names the ReserveWrite contract that broke.
func TestFuzzReserveWriteBites(t *testing.T) {
	bites(t, "FuzzReserveWrite", checkReserveWrite, []l1Bite{
		{"prefix granted one short", everywhere(upToOneShort), "prefix maximality"},
		{"OutOfMemory for a middle key", everywhere(oomMiddle), "request-order locking"},
		{"suffix granted instead of prefix", everywhere(reversedPrefix), "request-order locking"},
		{"tail answered KeyNotWritable", everywhere(tailNotWritable), "tail OOM statuses"},
		{"repeated key allocated twice", everywhere(repeatTwice), "no leak"},
		{"mismatched flags truncated", everywhere(truncateFlags), "ErrInvalidArgument"},
	})
}

// TestFuzzPrefixStrategiesBites proves the differential check itself (not
// only the model behind it) catches a strategy that grants a different k.
func TestFuzzPrefixStrategiesBites(t *testing.T) {
	bites(t, "FuzzPrefixStrategies", checkPrefixStrategies, []l1Bite{
		{"one-pass grants one short", only(l1.PrefixOnePass, upToOneShort), "differential"},
		{"PrefixNone grants a prefix", only(l1.PrefixNone, prefixNoneIgnored), "differential"},
		{"binary search grants a suffix", only(l1.PrefixBinarySearch, reversedPrefix), "differential"},
	})
}
