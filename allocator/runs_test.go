package allocator

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSortRunsAgainstSort checks Free's run sort, both its comparison path
// (under 64 runs) and its radix path, against slices.SortFunc: starts
// dense, strided by 8 MiB objects (2048 units), spread up to 2^62, and in
// the orders eviction produces (every other one first, reversed).
func TestSortRunsAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	byStart := func(x, y freeRun) int { return cmp.Compare(x.start, y.start) }
	for _, n := range []int{2, 3, 63, 64, 65, 1000, 5700} {
		for _, spread := range []int64{1, 2048, 1 << 40, 1 << 62} {
			for _, order := range []string{"random", "evens-then-odds", "reversed"} {
				starts := map[int64]bool{}
				runs := make([]freeRun, 0, n)
				for len(runs) < n {
					s := rng.Int64N(int64(n)*4) * spread
					if spread > 1<<20 {
						s = rng.Int64N(spread)
					}
					if !starts[s] {
						starts[s] = true
						runs = append(runs, freeRun{start: s, end: s + 1})
					}
				}
				slices.SortFunc(runs, byStart)
				want := slices.Clone(runs)
				switch order {
				case "random":
					rng.Shuffle(n, func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
				case "evens-then-odds":
					var evens, odds []freeRun
					for i, r := range runs {
						if i%2 == 0 {
							evens = append(evens, r)
						} else {
							odds = append(odds, r)
						}
					}
					runs = append(evens, odds...)
				case "reversed":
					slices.Reverse(runs)
				}
				sortRuns(runs, make([]freeRun, n))
				if !slices.Equal(runs, want) {
					require.Fail(t, fmt.Sprintf("n=%d spread=%d %s: sorted wrong", n, spread, order))
				}
			}
		}
	}
}

// TestMergeRunsJoinsTouching frees 5700 objects of 8 MiB, listed every
// other one first (the order on-demand eviction gave the scattered
// benchmark): they must come back as one range, released once.
func TestMergeRunsJoinsTouching(t *testing.T) {
	const n, s = 5700, 2048
	var runs []freeRun
	for _, parity := range []int64{0, 1} {
		for i := parity; i < n; i += 2 {
			runs = append(runs, freeRun{start: i * s, end: (i + 1) * s})
		}
	}
	got := mergeRuns(runs, make([]freeRun, len(runs)))
	if want := []freeRun{{0, n * s}}; !slices.Equal(got, want) {
		require.Fail(t, fmt.Sprintf("merged into %d runs, want %v", len(got), want))
	}
	// Two ranges with a gap stay two.
	runs = []freeRun{{30, 40}, {0, 10}, {10, 20}}
	got = mergeRuns(runs, make([]freeRun, len(runs)))
	if want := []freeRun{{0, 20}, {30, 40}}; !slices.Equal(got, want) {
		require.Fail(t, fmt.Sprintf("got %v, want %v", got, want))
	}
}
