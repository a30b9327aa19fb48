//go:build linux

package server

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/kvalloc/kvalloc/l1"
)

// TestHoldSetAgainstMap drives a holdSet and a plain map with the same
// random adds (batches of consecutive, repeated, sparse and old leases),
// subs and drops, and compares every lookup and the full contents.
func TestHoldSetAgainstMap(t *testing.T) {
	type ref struct {
		key l1.ObjectKey
		n   int64
	}
	key := func(i int) l1.ObjectKey { return l1.ObjectKey{ChunkHash: fmt.Sprint(i)} }
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var s holdSet
		m := map[l1.Lease]ref{}
		var next l1.Lease = 1
		for step := range 300 {
			switch rng.IntN(4) {
			case 0, 1: // a call's grant
				n := 1 + rng.IntN(40)
				keys := make([]l1.ObjectKey, n)
				res := make([]l1.Result, n)
				for i := range res {
					switch {
					case rng.IntN(10) == 0:
						res[i].Status = l1.OutOfMemory
						continue
					case rng.IntN(8) == 0 && next > 1: // an old lease
						res[i].Lease = 1 + l1.Lease(rng.IntN(int(next-1)))
					case rng.IntN(6) == 0 && i > 0 && res[i-1].Status == l1.OK: // a repeat
						res[i].Lease = res[i-1].Lease
					case rng.IntN(20) == 0: // a gap: another connection's leases
						next += l1.Lease(rng.IntN(200))
						fallthrough
					default:
						res[i].Lease = next
						next++
					}
					keys[i] = key(int(res[i].Lease))
				}
				cnt := int64(1 + rng.IntN(3))
				s.addAll(keys, res, cnt)
				for i, r := range res {
					if r.Status == l1.OK {
						h := m[r.Lease]
						h.key, h.n = keys[i], h.n+cnt
						m[r.Lease] = h
					}
				}
			case 2:
				l := 1 + l1.Lease(rng.IntN(int(next)))
				if rng.IntN(2) == 0 && len(s.runs) > 0 { // mostly a lease held
					r := s.runs[rng.IntN(len(s.runs))]
					l = r.lo + l1.Lease(rng.IntN(len(r.h)))
				}
				c := int64(1 + rng.IntN(3))
				s.sub(l, c)
				if h, ok := m[l]; ok {
					h.n -= min(c, h.n)
					if h.n == 0 {
						delete(m, l)
					} else {
						m[l] = h
					}
				}
			case 3:
				l := 1 + l1.Lease(rng.IntN(int(next)))
				if len(s.runs) > 0 {
					r := s.runs[rng.IntN(len(s.runs))]
					l = r.lo + l1.Lease(rng.IntN(len(r.h)))
				}
				s.drop(l)
				delete(m, l)
			}
			var total int64
			probe := func(l l1.Lease) {
				k := key(int(l))
				if got, want := s.held(&k, l), m[l].n; got != want {
					t.Fatalf("seed %d step %d: lease %d holds %d, want %d", seed, step, l, got, want)
				}
			}
			for l, h := range m {
				probe(l)
				total += h.n
			}
			for range 32 {
				probe(1 + l1.Lease(rng.IntN(int(next))))
			}
			if k := key(-1); s.held(&k, 1) != 0 {
				t.Fatal("a lease held under another key")
			}
			if step%16 != 0 {
				continue
			}
			s.publish()
			all := s.all()
			if len(all) != len(m) || s.len() != len(m) || s.total.Load() != total {
				t.Fatalf("seed %d step %d: %d holds (len %d, total %d), want %d (total %d)", seed, step, len(all), s.len(), s.total.Load(), len(m), total)
			}
			for i, h := range all {
				if i > 0 && all[i-1].lease >= h.lease || m[h.lease].n != h.n || m[h.lease].key != h.key {
					t.Fatalf("seed %d step %d: all()[%d] = %+v", seed, step, i, h)
				}
			}
		}
	}
}

// TestHoldSetCopiesKeys gives a holdSet keys whose strings alias a buffer,
// as a borrowing wire.Decoder's do, overwrites the buffer, and checks that
// the set still knows every key, in runs and in the map alike.
func TestHoldSetCopiesKeys(t *testing.T) {
	const n = 64
	buf := make([]byte, 0, n*8+16)
	keys := make([]l1.ObjectKey, n)
	for i := range keys {
		at := len(buf)
		buf = fmt.Appendf(buf, "%08d", i)
		keys[i] = l1.ObjectKey{ChunkHash: unsafe.String(&buf[at], 8), Model: "m", KVRank: uint32(i)}
	}
	model := []byte("model")
	keys[0].Model = unsafe.String(&model[0], len(model))
	dense := make([]l1.Result, n)
	for i := range dense {
		dense[i].Lease = l1.Lease(1 + i)
	}
	sparse := make([]l1.Result, 2) // too sparse for a run: the map
	sparse[0].Lease, sparse[1].Lease = 1000, 5000
	var s holdSet
	s.addAll(keys, dense, 1)
	s.addAll(keys[:2], sparse, 1)
	want := make([]l1.ObjectKey, n)
	for i, k := range keys {
		want[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%08d", i), Model: strings.Clone(k.Model), KVRank: k.KVRank}
	}
	for i := range buf {
		buf[i] = 'x'
	}
	copy(model, "xxxxx")
	for i := range want {
		if got := s.held(&want[i], l1.Lease(1+i)); got != 1 {
			t.Fatalf("key %d: %d holds after its bytes changed, want 1", i, got)
		}
	}
	for i, l := range []l1.Lease{1000, 5000} {
		if got := s.held(&want[i], l); got != 1 {
			t.Fatalf("lease %d (map): %d holds after its key's bytes changed, want 1", l, got)
		}
	}
	for _, h := range s.all() {
		if i := int(h.key.KVRank); h.key != want[i] {
			t.Fatalf("all(): lease %d has key %+v, want %+v", h.lease, h.key, want[i])
		}
	}
}
