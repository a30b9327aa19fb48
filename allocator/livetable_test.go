package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
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
					require.Fail(t, fmt.Sprintf("stride %d step %d: find(%d) = slot %d, want %+v", stride, step, u, i, s))
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
				require.Fail(t, fmt.Sprintf("stride %d step %d: %d entries in %d slots, want %d", stride, step, tab.n, len(tab.slots), len(want)))
			}
			if step%997 == 0 {
				for k, s := range want {
					if i := tab.find(k); i < 0 || tab.slots[i] != s {
						require.Fail(t, fmt.Sprintf("stride %d step %d: lost key %d", stride, step, k))
					}
				}
				n := 0
				tab.each(func(u, size int64, gen uint64) {
					if s := want[u]; s.size != size || s.gen != gen {
						require.Fail(t, fmt.Sprintf("stride %d: each gave %d %d %d, want %+v", stride, u, size, gen, s))
					}
					n++
				})
				if n != len(want) {
					require.Fail(t, fmt.Sprintf("stride %d: each visited %d, want %d", stride, n, len(want)))
				}
			}
			if tab.find(u+stride*4096) >= 0 {
				require.Fail(t, fmt.Sprintf("stride %d: found a key never inserted", stride))
			}
		}
	}
}

// reachable fails unless every entry of tab lies at its home or after it
// with no empty slot and no tomb in between: the invariant find needs once
// purge has run.
func reachable(t *testing.T, tab *liveTable) {
	t.Helper()
	mask := len(tab.slots) - 1
	for j, s := range tab.slots {
		if s.key == tomb {
			require.Fail(t, fmt.Sprintf("slot %d: a tomb after purge", j))
		}
		if s.key == 0 {
			continue
		}
		for i := tab.home(s.key); i != j; i = (i + 1) & mask {
			if tab.slots[i].key == 0 {
				require.Fail(t, fmt.Sprintf("slot %d (key %d): empty slot %d between its home and it", j, s.key, i))
			}
		}
	}
}

// TestLiveTablePurge kills random subsets of a table, from none to all,
// keys dense, strided and wrapping around the end, and checks after purge
// that every survivor is found with its size and generation, no killed
// key is, the count is right and no probe chain is broken. While the tombs
// stand, a killed key must not be found either: Free relies on it to
// reject a block repeated in one call.
func TestLiveTablePurge(t *testing.T) {
	for _, stride := range []int64{1, 16, 2048, 1 << 30} {
		for _, frac := range []float64{0, 0.01, 0.5, 0.9, 1} {
			rng := rand.New(rand.NewPCG(uint64(stride), uint64(frac*100)))
			tab := newLiveTable()
			want := map[int64]liveSlot{}
			for round := range 30 {
				for range rng.IntN(3000) {
					u := rng.Int64N(1<<20) * stride
					if _, ok := want[u]; ok {
						continue
					}
					s := liveSlot{key: u + 1, size: 1 + rng.Int64N(100), gen: uint64(round*10000 + len(want))}
					tab.reserve(1)
					tab.insert(u, s.size, s.gen)
					want[u] = s
				}
				var killed []int64
				for u := range want {
					if rng.Float64() < frac {
						killed = append(killed, u)
					}
				}
				for _, u := range killed {
					i := tab.find(u)
					if i < 0 {
						require.Fail(t, fmt.Sprintf("stride %d: lost key %d before the kill", stride, u))
					}
					tab.kill(i)
					if tab.find(u) >= 0 {
						require.Fail(t, fmt.Sprintf("stride %d: found key %d after its kill", stride, u))
					}
					delete(want, u)
				}
				tab.purge()
				reachable(t, &tab)
				if tab.n != len(want) {
					require.Fail(t, fmt.Sprintf("stride %d frac %v: count %d, want %d", stride, frac, tab.n, len(want)))
				}
				for u, s := range want {
					if i := tab.find(u); i < 0 || tab.slots[i] != s {
						require.Fail(t, fmt.Sprintf("stride %d frac %v: survivor %d lost", stride, frac, u))
					}
				}
				for _, u := range killed {
					if tab.find(u) >= 0 {
						require.Fail(t, fmt.Sprintf("stride %d frac %v: killed key %d found after purge", stride, frac, u))
					}
				}
			}
		}
	}
}
