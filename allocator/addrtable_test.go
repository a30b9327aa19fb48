package allocator

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAddrTableAgainstMap diffs the open-addressing table against a Go map
// over random puts, deletes and rekeys (an entry moved to an absent key, as
// an extent's first or end unit moves), with keys drawn from a small range
// so that probe chains collide and backward-shift deletion is exercised.
func TestAddrTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	tab := newAddrTable()
	ref := map[int64]int32{}
	for i := range 20000 {
		k := int64(rng.IntN(600))
		switch op := rng.IntN(4); {
		case op == 0:
			tab.del(k)
			delete(ref, k)
		case op == 1:
			old := int64(rng.IntN(600))
			_, present := ref[old]
			if _, taken := ref[k]; !present || taken {
				break
			}
			tab.rekey(old, k, int32(i))
			delete(ref, old)
			ref[k] = int32(i)
		default:
			tab.put(k, int32(i))
			ref[k] = int32(i)
		}
		if i%97 == 0 {
			require.Equal(t, len(ref), tab.n)
			for q := int64(0); q < 600; q++ {
				v, ok := tab.get(q)
				rv, rok := ref[q]
				require.Equal(t, rok, ok, "key %d after op %d", q, i)
				require.Equal(t, rv, v, "key %d after op %d", q, i)
			}
		}
	}
	seen := 0
	tab.each(func(k int64, v int32) {
		seen++
		require.Equal(t, ref[k], v)
	})
	require.Equal(t, len(ref), seen)
}
