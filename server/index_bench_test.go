//go:build linux

package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// BenchmarkIndexHandoff is the index's part of a handoff at scale: a 45
// GiB pool full of 256 KiB objects (184,320 of them, NoReserve, so it
// costs no memory), exported and encoded by the old daemon, then decoded,
// restored into a fresh allocator and Verified, and restored into a
// manager by the new one. It reports the index's bytes and each side's
// milliseconds.
func BenchmarkIndexHandoff(b *testing.B) {
	const pool, size = 45 << 30, 256 << 10
	region := func() *allocator.Allocator {
		r, err := hostmem.NewSegmentedRegion(pool, hostmem.SegmentedOptions{NoReserve: true})
		if err != nil {
			b.Fatal(err)
		}
		<-r.Done() // every segment usable: Restore needs the whole region
		a, err := allocator.New(r, allocator.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	a := region()
	defer a.Close()
	cfg := l1.Config{Placement: allocator.Scattered, Eviction: l1.EvictPrefix}
	m, err := l1.New[l1.ObjectKey](a, cfg)
	if err != nil {
		b.Fatal(err)
	}
	const n = pool / size
	ks := make([]l1.ObjectKey, 0, 4096)
	for done := 0; done < n; done += len(ks) {
		ks = ks[:0]
		for i := done; i < min(n, done+4096); i++ {
			ks = append(ks, l1.ObjectKey{ChunkHash: fmt.Sprintf("%032x", i), Model: "meta-llama/Llama-3.1-70B", KVRank: uint32(i % 8)})
		}
		rs, err := m.ReserveWrite(ks, nil, size, l1.ModeAll)
		if err != nil {
			b.Fatal(err)
		}
		leases := make([]l1.Lease, len(rs))
		for i := range rs {
			if rs[i].Status != l1.OK {
				b.Fatalf("key %d: %v", done+i, rs[i].Status)
			}
			leases[i] = rs[i].Lease
		}
		if _, err := m.FinishWrite(ks, leases); err != nil {
			b.Fatal(err)
		}
	}
	id := poolIdentity{bytes: pool, align: a.Align()}
	var oldSide, newSide time.Duration
	var bytes int
	for b.Loop() {
		t0 := time.Now()
		objs, err := m.Export()
		if err != nil {
			b.Fatal(err)
		}
		idx := encodeIndex(nil, id, cfg.Eviction, 1, objs, nil, nil)
		t1 := time.Now()
		x, err := decodeIndex(idx, id)
		if err != nil {
			b.Fatal(err)
		}
		fresh := region()
		m2, err := restoreIndex(fresh, cfg, x, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if m2.Len() != n {
			b.Fatalf("%d objects restored of %d", m2.Len(), n)
		}
		fresh.Close()
		oldSide += t1.Sub(t0)
		newSide += t2.Sub(t1)
		bytes = len(idx)
	}
	b.ReportMetric(float64(bytes), "index-bytes")
	b.ReportMetric(float64(oldSide.Milliseconds())/float64(b.N), "export-ms")
	b.ReportMetric(float64(newSide.Milliseconds())/float64(b.N), "restore-ms")
}
