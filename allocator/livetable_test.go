package allocator

import (
	"math/rand/v2"
	"testing"
)

// TestLiveTableAgainstMap drives the live-block table with random inserts
// and deletes, keys dense and strided so probe chains collide and wrap
// around the end, and checks every lookup against a map, the load factor
// and the count after each step.
func TestLiveTableAgainstMap(t *testing.T) {
	for _, stride := range []int64{1, 4, 2048, 1 << 20} {
		rng := rand.New(rand.NewPCG(uint64(stride), 9))
		tab := newLiveTable()
		want := map[int64]liveSlot{}
		for step := range 20000 {
			u := rng.Int64N(4096) * stride
			if s, ok := want[u]; ok {
				i := tab.find(u)
				if i < 0 || tab.slots[i] != s {
					t.Fatalf("stride %d step %d: find(%d) = slot %d, want %+v", stride, step, u, i, s)
				}
				tab.deleteAt(i)
				delete(want, u)
			} else {
				s := liveSlot{key: u + 1, size: 1 + rng.Int64N(100), gen: uint64(step + 1)}
				tab.reserve(1)
				tab.insert(u, s.size, s.gen)
				want[u] = s
			}
			if tab.n != len(want) || 4*tab.n > 3*len(tab.slots) {
				t.Fatalf("stride %d step %d: %d entries in %d slots, want %d", stride, step, tab.n, len(tab.slots), len(want))
			}
			if step%997 == 0 {
				for k, s := range want {
					if i := tab.find(k); i < 0 || tab.slots[i] != s {
						t.Fatalf("stride %d step %d: lost key %d", stride, step, k)
					}
				}
				n := 0
				tab.each(func(u, size int64, gen uint64) {
					if s := want[u]; s.size != size || s.gen != gen {
						t.Fatalf("stride %d: each gave %d %d %d, want %+v", stride, u, size, gen, s)
					}
					n++
				})
				if n != len(want) {
					t.Fatalf("stride %d: each visited %d, want %d", stride, n, len(want))
				}
			}
			if tab.find(u+stride*4096) >= 0 {
				t.Fatalf("stride %d: found a key never inserted", stride)
			}
		}
	}
}
