//go:build linux

package bench

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
)

// fairKeys is the flooder's batch: a 10,000-key frame, about the largest
// a serving engine sends.
const fairKeys = 10000

// finishedKeys writes and finishes n objects of 4096 bytes under seed on c.
func finishedKeys(b *testing.B, c *client.Client, n int, seed uint64) []l1.ObjectKey {
	b.Helper()
	ks := cycleKeys(n, seed)
	leases := make([]client.Lease, n)
	res, err := c.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	daemonLeases(b, "ReserveWrite", res, err, leases)
	daemonAll(b, "FinishWrite")(c.FinishWrite(ks, leases))
	return ks
}

// BenchmarkDaemonFairness measures a one-key call's latency while another
// connection sends 10,000-key frames back to back (flood=10000: op=read, a
// ReserveRead of 10,000 objects and its FinishRead, in a loop; op=write, a
// ReserveWrite of 10,000 new 4 KiB objects and its AbortWrite), and with
// no other connection (flood=0). Each op is one one-key call of the victim,
// ReserveRead and FinishRead in turn, timed one by one; it reports the
// p50 and p99 of those calls in ms and the flood's frames/s. The target:
// the flood must not push the victim's p99 past 10 ms.
func BenchmarkDaemonFairness(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("a second connection's allocations land in the timed region")
	}
	for _, c := range []struct {
		flood int
		op    string
	}{{0, ""}, {fairKeys, "read"}, {fairKeys, "write"}} {
		name := "flood=0"
		if c.flood > 0 {
			name = fmt.Sprintf("flood=%d/op=%s", c.flood, c.op)
		}
		flood := c.flood
		b.Run(name, func(b *testing.B) {
			_, dial := startDaemon(b, 64<<20, l1.Config{})
			victim := dial()
			vk := finishedKeys(b, victim, 1, 7001)
			var stop atomic.Bool
			var frames atomic.Int64
			var wg sync.WaitGroup
			if flood > 0 {
				fl := dial()
				var fk []l1.ObjectKey
				if c.op == "read" {
					fk = finishedKeys(b, fl, flood, 7002)
				} else {
					fk = cycleKeys(flood, 7002)
				}
				leases := make([]client.Lease, flood)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !stop.Load() {
						if c.op == "read" {
							res, err := fl.ReserveRead(fk, 1)
							daemonLeases(b, "flood ReserveRead", res, err, leases)
							daemonAll(b, "flood FinishRead")(fl.FinishRead(fk, leases, 1))
						} else {
							res, err := fl.ReserveWrite(fk, nil, 4096, l1.ModeAll)
							daemonLeases(b, "flood ReserveWrite", res, err, leases)
							daemonAll(b, "flood AbortWrite")(fl.AbortWrite(fk, leases))
						}
						frames.Add(2)
					}
				}()
				for frames.Load() < 2 { // the flood is under way
					time.Sleep(time.Millisecond)
				}
			}
			lat := make([]time.Duration, 0, 1<<16)
			one := make([]client.Lease, 1)
			i := 0
			start := frames.Load()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				if i%2 == 0 {
					res, err := victim.ReserveRead(vk, 1)
					daemonLeases(b, "ReserveRead", res, err, one)
				} else {
					daemonAll(b, "FinishRead")(victim.FinishRead(vk, one, 1))
				}
				lat = append(lat, time.Since(t0))
				i++
			}
			b.StopTimer()
			flooded := frames.Load() - start
			stop.Store(true)
			wg.Wait()
			if i%2 == 1 {
				daemonAll(b, "FinishRead")(victim.FinishRead(vk, one, 1))
			}
			reportLatency(b, lat)
			if s := b.Elapsed().Seconds(); flood > 0 && s > 0 {
				b.ReportMetric(float64(flooded)/s, "flood-frames/s")
			}
		})
	}
}

// reportLatency reports the p50 and p99 of lat in ms.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1e6
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
