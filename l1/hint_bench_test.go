package l1

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/stretchr/testify/require"
)

// BenchmarkLookupHints times a ReserveRead and a FinishRead of 5700 stored
// ObjectKeys, named in the order of the call before (order=same: every
// lookup hint is right) or in a fresh order each call (order=shuffled:
// hints give up after hintSlack wrong guesses and the keys are hashed and
// looked up), with keys holding the stored strings or equal copies of
// them (strings=copies: a right hint compares bytes). Reports ns/key.
func BenchmarkLookupHints(b *testing.B) {
	const n = 5700
	for _, order := range []string{"same", "shuffled"} {
		for _, strs := range []string{"stored", "copies"} {
			b.Run(fmt.Sprintf("order=%s/strings=%s", order, strs), func(b *testing.B) {
				r, err := hostmem.NewHeapRegion(n * 4096)
				require.NoError(b, err)
				a, err := allocator.New(r, allocator.Options{Align: 4096})
				require.NoError(b, err)
				defer a.Close()
				m, err := New[ObjectKey](a, Config{})
				require.NoError(b, err)
				defer m.Close()
				keys := hashKeys(n)
				res, err := m.ReserveWrite(keys, nil, 4096, ModeAll)
				require.NoError(b, err)
				leases := make([]Lease, n)
				for i, r := range res {
					leases[i] = r.Lease
				}
				if _, err := m.FinishWrite(keys, leases); err != nil {
					require.NoError(b, err)
				}
				// Eight orders of the keys, each in strings of its own
				// for strings=copies.
				rng := rand.New(rand.NewPCG(1, 2))
				orders := make([][]ObjectKey, 8)
				for j := range orders {
					ks := append([]ObjectKey(nil), keys...)
					if order == "shuffled" {
						rng.Shuffle(n, func(x, y int) { ks[x], ks[y] = ks[y], ks[x] })
					}
					if strs == "copies" {
						for i := range ks {
							ks[i].ChunkHash = string([]byte(ks[i].ChunkHash))
							ks[i].Model = string([]byte(ks[i].Model))
						}
					}
					orders[j] = ks
				}
				j := 0
				for b.Loop() {
					ks := orders[j%len(orders)]
					j++
					rr, err := m.ReserveRead(ks, 1)
					require.NoError(b, err)
					for i, r := range rr {
						leases[i] = r.Lease
					}
					if _, err := m.FinishRead(ks, leases, 1); err != nil {
						require.NoError(b, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
			})
		}
	}
}
