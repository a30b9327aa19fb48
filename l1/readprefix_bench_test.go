package l1_test

import (
	"fmt"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/stretchr/testify/require"
)

// BenchmarkReadPrefix is a serving engine's lookup of one request: a chain
// of 32 keys whose first hit keys are resident, read-locked up to the
// first miss and released. It compares a ReserveRead per key (stopping at
// the first miss, as a caller without a prefix call must) with one
// ReserveReadPrefix and one AppendReadPrefix, and reports ns per key
// looked at (the hits and the miss).
func BenchmarkReadPrefix(b *testing.B) {
	const chain = 32
	for _, hit := range []int{0, 8, 24, 32} {
		r, err := hostmem.NewHeapRegion(64 * 4096)
		require.NoError(b, err)
		a, err := allocator.New(r, allocator.Options{Align: 4096})
		require.NoError(b, err)
		m, err := l1.New[int](a, l1.Config{})
		require.NoError(b, err)
		ks := keys(0, chain)
		rs, err := m.ReserveWrite(ks[:hit], nil, 4096, l1.ModeAll)
		require.NoError(b, err)
		wl := make([]l1.Lease, hit)
		for i := range wl {
			wl[i] = rs[i].Lease
		}
		if _, err := m.FinishWrite(ks[:hit], wl); err != nil {
			require.NoError(b, err)
		}
		looked := float64(min(hit+1, chain))
		leases := make([]l1.Lease, 0, chain)
		release := func(n int) {
			if n > 0 {
				if _, err := m.FinishRead(ks[:n], leases, 1); err != nil {
					require.NoError(b, err)
				}
			}
		}
		b.Run(fmt.Sprintf("hits=%d/call=per-key", hit), func(b *testing.B) {
			for b.Loop() {
				leases = leases[:0]
				n := 0
				for ; n < chain; n++ {
					rs, _ := m.ReserveRead(ks[n:n+1], 1)
					if rs[0].Status != l1.OK {
						break
					}
					leases = append(leases, rs[0].Lease)
				}
				release(n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/looked, "ns/key")
		})
		b.Run(fmt.Sprintf("hits=%d/call=prefix", hit), func(b *testing.B) {
			for b.Loop() {
				rs, n, _ := m.ReserveReadPrefix(ks, 1)
				leases = leases[:0]
				for _, r := range rs[:n] {
					leases = append(leases, r.Lease)
				}
				release(n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/looked, "ns/key")
		})
		b.Run(fmt.Sprintf("hits=%d/call=append", hit), func(b *testing.B) {
			for b.Loop() {
				var n int
				leases, n, _ = m.AppendReadPrefix(leases[:0], ks, 1)
				release(n)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/looked, "ns/key")
		})
		if err := m.Close(); err != nil {
			require.NoError(b, err)
		}
		if err := a.Close(); err != nil {
			require.NoError(b, err)
		}
	}
}
