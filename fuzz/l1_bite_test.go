package fuzz

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/internal/reference/baseline"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/internal/reference/mutant"
	"github.com/kvalloc/kvalloc/l1"
)

// The broken variants come from internal/reference/mutant.

// everywhere applies v under every prefix strategy.
func everywhere(v l1check.Variant) variants {
	return func(baseline.Strategy) l1check.Variant { return v }
}

// only applies v under strategy s and the real system elsewhere.
func only(s baseline.Strategy, v l1check.Variant) variants {
	return func(t baseline.Strategy) l1check.Variant {
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
	bitesFirst(t, target, "", check, cases)
}

// bitesFirst is bites trying the seeds whose names start with first before
// the others, so that a bug only those seeds reach is found without
// running the whole corpus first (under -race, seconds per case).
func bitesFirst(t *testing.T, target, first string, check func(l1check.Setup, []l1check.Op, variants) error, cases []l1Bite) {
	seeds := corpus(t, target)
	slices.SortStableFunc(seeds, func(a, b seed) int {
		return cmp.Compare(b2i(!strings.HasPrefix(a.name, first)), b2i(!strings.HasPrefix(b.name, first)))
	})
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

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFuzzL1LifecycleBites proves FuzzL1Lifecycle's checker fails on each
// broken manager.
func TestFuzzL1LifecycleBites(t *testing.T) {
	bites(t, "FuzzL1Lifecycle", checkL1Lifecycle, []l1Bite{
		{"expired writes become readable", everywhere(mutant.VariantWritesNeverExpire), "status OK, model KEY_NOT_EXIST"},
		{"expired temporary reads are never freed", everywhere(mutant.VariantReadsNeverExpire), "status OK, model KEY_NOT_EXIST"},
		{"repeated key allocated twice", everywhere(mutant.VariantRepeatAllocTwice), "leak"},
		{"OutOfMemory for a middle key", everywhere(mutant.VariantOOMMiddle), "request-order locking"},
		{"prefix granted one short", everywhere(mutant.VariantUpToOneShort), "prefix maximality"},
		{"mismatched flags truncated", everywhere(mutant.VariantTruncateFlags), "ErrInvalidArgument"},
		{"leases ignored", everywhere(mutant.VariantLeasesIgnored), "model STALE_LEASE"},
		{"TTL overflow", everywhere(mutant.VariantTTLOverflow), "Len() = 0, model 2"},
		{"listeners share Keys", everywhere(mutant.VariantSharedKeys), "listeners got write-reserved"},
		{"prefix read locks past the miss", everywhere(mutant.VariantReadPrefixLocksAll), "ReserveReadPrefix"},
	})
	bitesFirst(t, "FuzzL1Lifecycle", "quarantine", checkL1Lifecycle, []l1Bite{
		{"quarantine frees the block at lapse", everywhere(mutant.VariantQuarantineFreesAtLapse), "blocks quarantined"},
		{"quarantined blocks evicted under pressure", everywhere(mutant.VariantQuarantineEvicted), "quarantine: key"},
	})
	bitesFirst(t, "FuzzL1Lifecycle", "lookups", checkL1Lifecycle, []l1Bite{
		{"write-locked keys counted as read hits", everywhere(mutant.VariantReadHitOnFind), "Stats counters"},
		{"eviction misses merges", everywhere(mutant.VariantMergeBlind), "no extra victim"},
	})
}

// TestListenerDelivery runs the delivery stress check on the manager: a
// 20 µs listener and 8 callers.
func TestListenerDelivery(t *testing.T) {
	m, cleanup := deliveryManager(t)
	defer cleanup()
	if err := l1check.CheckDelivery(m, 8, 64, 20*time.Microsecond, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// TestListenerDeliveryBites proves the stress check fails on the delivery
// the manager had before each caller delivered its own events: callers
// return at once and one goroutine delivers everything, however far
// behind.
func TestListenerDeliveryBites(t *testing.T) {
	m, cleanup := deliveryManager(t)
	defer cleanup()
	err := l1check.CheckDelivery(mutant.NewUnboundedDelivery(m), 8, 64, 20*time.Microsecond, 200*time.Millisecond)
	if err == nil {
		t.Fatal("the delivery check passed on unbounded delivery")
	}
	t.Logf("caught: %v", err)
}

func deliveryManager(t *testing.T) (*l1.Manager[l1check.Key], func()) {
	r, err := hostmem.NewHeapRegion(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	a, err := allocator.New(r, allocator.Options{Align: 64})
	if err != nil {
		t.Fatal(err)
	}
	m, err := l1.New[l1check.Key](a, l1.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return m, func() { m.Close(); a.Close() }
}

// TestFuzzReserveWriteBites proves FuzzReserveWrite's checker fails on
// each broken manager, and names the ReserveWrite contract that broke.
func TestFuzzReserveWriteBites(t *testing.T) {
	bites(t, "FuzzReserveWrite", checkReserveWrite, []l1Bite{
		{"prefix granted one short", everywhere(mutant.VariantUpToOneShort), "prefix maximality"},
		{"OutOfMemory for a middle key", everywhere(mutant.VariantOOMMiddle), "request-order locking"},
		{"suffix granted instead of prefix", everywhere(mutant.VariantReversedPrefix), "request-order locking"},
		{"tail answered KeyNotWritable", everywhere(mutant.VariantTailNotWritable), "tail OOM statuses"},
		{"repeated key allocated twice", everywhere(mutant.VariantRepeatAllocTwice), "no leak"},
		{"mismatched flags truncated", everywhere(mutant.VariantTruncateFlags), "ErrInvalidArgument"},
		{"rejected call reserves keys", everywhere(mutant.VariantRejectLate), "rejected call changed state"},
	})
	bitesFirst(t, "FuzzReserveWrite", "quarantine", checkReserveWrite, []l1Bite{
		{"quarantine frees the block at lapse", everywhere(mutant.VariantQuarantineFreesAtLapse), "quarantine: key"},
		{"quarantined blocks evicted under pressure", everywhere(mutant.VariantQuarantineEvicted), "quarantine: key"},
		{"eviction misses merges", everywhere(mutant.VariantMergeBlind), "no extra victim"},
	})
}

// TestFuzzPrefixStrategiesBites proves the differential check itself (not
// only the model behind it) catches a strategy that grants a different k.
func TestFuzzPrefixStrategiesBites(t *testing.T) {
	bites(t, "FuzzPrefixStrategies", checkPrefixStrategies, []l1Bite{
		{"one-pass grants one short", only(baseline.OnePass, mutant.VariantUpToOneShort), "differential"},
		{"all or nothing grants a prefix", only(baseline.None, mutant.VariantPrefixNoneIgnored), "differential"},
		{"binary search grants a suffix", only(baseline.BinarySearch, mutant.VariantReversedPrefix), "differential"},
	})
}
