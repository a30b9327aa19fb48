package allocator

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSummedBitmapAgainstBools diffs the bitmaps against a []bool over
// random sets, clears, strided sets and range clears, checking anySet,
// countRange and the summary invariant.
func TestSummedBitmapAgainstBools(t *testing.T) {
	const n = 3000
	rng := rand.New(rand.NewPCG(7, 11))
	m := newSummedBitmap(n)
	ref := make([]bool, n)
	for op := range 5000 {
		lo := int64(rng.IntN(n))
		hi := lo + int64(rng.IntN(n-int(lo)+1))
		switch rng.IntN(4) {
		case 0:
			m.set(lo)
			ref[lo] = true
		case 1:
			m.clear(lo)
			ref[lo] = false
		case 2:
			step := int64(1 + rng.IntN(150))
			k := (hi - lo + step - 1) / step
			m.setEvery(lo, step, k)
			for i := int64(0); i < k; i++ {
				ref[lo+i*step] = true
			}
		case 3:
			m.clearRange(lo, hi)
			clear(ref[lo:hi])
		}
		require.NoError(t, m.verify(), "op %d", op)
		qlo := int64(rng.IntN(n))
		qhi := qlo + int64(rng.IntN(n-int(qlo)+1))
		var want int64
		for _, b := range ref[qlo:qhi] {
			if b {
				want++
			}
		}
		require.Equal(t, want, m.countRange(qlo, qhi), "countRange(%d, %d) after op %d", qlo, qhi, op)
		require.Equal(t, want > 0, m.anySet(qlo, qhi), "anySet(%d, %d) after op %d", qlo, qhi, op)
	}
}
