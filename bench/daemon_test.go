//go:build linux

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// The daemon's benchmarks: kvallocd in process, its client over a real
// Unix socket, so every call is a frame each way and a context switch to
// the daemon's connection goroutine and back.

// startDaemon runs a daemon with a pool of poolSize bytes (a memfd, never
// touched: the benchmarks write no KV bytes) and the manager configuration
// cfg, and returns a function that dials it, speaking the protocol's
// highest version (2, key handles).
func startDaemon(b *testing.B, poolSize int64, cfg l1.Config) (*server.Server, func() *client.Client) {
	return startDaemonVersion(b, poolSize, cfg, 0)
}

// startDaemonVersion is startDaemon whose clients speak protocol version
// (client.Options.Version).
func startDaemonVersion(b *testing.B, poolSize int64, cfg l1.Config, version uint32) (*server.Server, func() *client.Client) {
	b.Helper()
	s, err := server.New(server.Config{SocketPath: filepath.Join(b.TempDir(), "kvallocd.sock"), PoolSize: poolSize, L1: cfg})
	if err != nil {
		b.Skipf("no daemon: %v", err)
	}
	go s.Serve()
	b.Cleanup(func() { s.Close() })
	return s, func() *client.Client {
		c, err := client.Dial(s.SocketPath(), client.Options{Timeout: time.Minute, Version: version})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
}

// BenchmarkDaemonCycle is BenchmarkL1Cycle's production cycle through the
// daemon: 5700 keys of 8 MiB in a 45 GiB pool, ReserveWrite, FinishWrite,
// ReserveRead, FinishRead, Delete, five frames each way of up to 400 KB.
// Reports ns/key, and cpu-ns/key, the process's CPU time (client, daemon
// and collector); compared with L1Cycle/size=8MiB/keys=5700, the same
// cycle in process. The client speaks its default, protocol version 1,
// every key sent five times; BenchmarkDaemonCycleV2 is the same cycle in
// version 2, which names the finished keys by handle.
func BenchmarkDaemonCycle(b *testing.B) { daemonCycleBench(b, client.DefaultVersion) }

// BenchmarkDaemonCycleV2 is BenchmarkDaemonCycle with a client of protocol
// version 2: what key handles save or cost, in the same run.
func BenchmarkDaemonCycleV2(b *testing.B) { daemonCycleBench(b, wire.Version2) }

func daemonCycleBench(b *testing.B, version uint32) {
	b.Run(fmt.Sprintf("size=8MiB/keys=%d", prodKeys), func(b *testing.B) {
		_, dial := startDaemonVersion(b, int64(prodKeys)*prodObject, l1.Config{}, version)
		c := dial()
		if c.Version() != version {
			b.Fatalf("speaking version %d, not %d", c.Version(), version)
		}
		keys := cycleKeys(prodKeys, 2)
		leases := make([]client.Lease, prodKeys)
		daemonCycle(b, c, keys, leases, prodObject) // warm: see TestAllocsPerOpIndependentOfN
		b.ReportAllocs()
		cpu := startCPU()
		for b.Loop() {
			daemonCycle(b, c, keys, leases, prodObject)
		}
		perUnit(b, prodKeys, "ns/key")
		cpu.report(b, prodKeys, "ns/key")
	})
}

func daemonCycle(b *testing.B, c *client.Client, keys []l1.ObjectKey, leases []client.Lease, size int64) {
	res, err := c.ReserveWrite(keys, nil, size, l1.ModeAll)
	daemonLeases(b, "ReserveWrite", res, err, leases)
	daemonAll(b, "FinishWrite")(c.FinishWrite(keys, leases))
	res, err = c.ReserveRead(keys, 1)
	daemonLeases(b, "ReserveRead", res, err, leases)
	daemonAll(b, "FinishRead")(c.FinishRead(keys, leases, 1))
	daemonAll(b, "Delete")(c.Delete(keys, false))
}

func daemonLeases(b *testing.B, op string, res []client.Result, err error, leases []client.Lease) {
	if err != nil {
		b.Fatalf("%s: %v", op, err)
	}
	for i, r := range res {
		if r.Status != wire.StatusOK {
			b.Fatalf("%s: key %d: %v", op, i, r.Status)
		}
		leases[i] = r.Lease
	}
}

func daemonAll(b *testing.B, op string) func([]wire.Status, error) {
	return func(sts []wire.Status, err error) {
		if err != nil {
			b.Fatalf("%s: %v", op, err)
		}
		for i, s := range sts {
			if s != wire.StatusOK {
				b.Fatalf("%s: key %d: %v", op, i, s)
			}
		}
	}
}

// BenchmarkDaemonRoundTrip times one round trip on one connection:
// op=ping is the empty request and answer, the floor; op=reserve-finish is
// a one-key ReserveWrite of a new 4 KiB object and its FinishWrite, two
// round trips (the objects are deleted, 1024 at a time, with the timer
// stopped). Reports ns/rtt, the time per round trip, so that
// reserve-finish ÷ ping is what a one-key call costs over an empty one.
func BenchmarkDaemonRoundTrip(b *testing.B) {
	b.Run("op=ping", func(b *testing.B) {
		_, dial := startDaemon(b, 64<<20, l1.Config{})
		c := dial()
		if err := c.Ping(); err != nil { // warm
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Ping(); err != nil {
				b.Fatal(err)
			}
		}
		perUnit(b, 1, "ns/rtt")
	})
	b.Run("op=reserve-finish", func(b *testing.B) {
		_, dial := startDaemon(b, 64<<20, l1.Config{})
		c := dial()
		const batch = 1024
		keys := cycleKeys(batch, 9)
		one := make([]client.Lease, 1)
		i := 0
		step := func() {
			if i == batch {
				b.StopTimer()
				daemonAll(b, "Delete")(c.Delete(keys, false))
				i = 0
				b.StartTimer()
			}
			k := keys[i : i+1]
			res, err := c.ReserveWrite(k, nil, 4096, l1.ModeAll)
			daemonLeases(b, "ReserveWrite", res, err, one)
			daemonAll(b, "FinishWrite")(c.FinishWrite(k, one))
			i++
		}
		step() // warm
		b.ReportAllocs()
		for b.Loop() {
			step()
		}
		perUnit(b, 2, "ns/rtt")
	})
}

// BenchmarkDaemonClients runs clients=N connections at once, each its own
// goroutine cycling 32-key batches (ReserveWrite, FinishWrite,
// ReserveRead, FinishRead, Delete: five calls, one op) on keys of its own,
// and reports calls/s over all of them: clients=8 ÷ clients=1 is how the
// daemon scales with connections on this machine. The clients take the
// b.N cycles from a shared counter; the goroutines start, and every client
// cycles once, before the timer starts.
//
// It skips under TestAllocsPerOpIndependentOfN, as BenchmarkContention
// does: with eight connections one allocation a run lands inside the timed
// region (71 allocs/op at 1x, 70 from 10x on), which at make bench's
// iteration counts rounds away.
func BenchmarkDaemonClients(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("one allocation a run inside the timed region with eight connections; see the doc comment")
	}
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			_, dial := startDaemon(b, 64<<20, l1.Config{})
			var (
				next  atomic.Int64
				wg    sync.WaitGroup
				start atomic.Bool // spun on, not a channel: a wake-up from one allocates
			)
			const calls = 5 // per cycle
			cs := make([]*client.Client, n)
			keys := make([][]l1.ObjectKey, n)
			leases := make([][]client.Lease, n)
			for i := range n {
				cs[i], keys[i], leases[i] = dial(), cycleKeys(32, 301+uint64(i)), make([]client.Lease, 32)
			}
			// Warm, with every client's objects alive at once, as they will
			// be: the manager's tables grow to that before the timer starts
			// (see TestAllocsPerOpIndependentOfN).
			for i, c := range cs {
				res, err := c.ReserveWrite(keys[i], nil, 4096, l1.ModeAll)
				daemonLeases(b, "ReserveWrite", res, err, leases[i])
			}
			for i, c := range cs {
				daemonAll(b, "AbortWrite")(c.AbortWrite(keys[i], leases[i]))
				daemonCycle(b, c, keys[i], leases[i], 4096)
			}
			for i := range n {
				c, keys, leases := cs[i], keys[i], leases[i]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for !start.Load() {
						runtime.Gosched()
					}
					for next.Add(1) <= int64(b.N) {
						daemonCycle(b, c, keys, leases, 4096)
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			start.Store(true)
			wg.Wait()
			b.StopTimer()
			if s := b.Elapsed().Seconds(); s > 0 {
				b.ReportMetric(float64(calls*b.N)/s, "calls/s")
			}
		})
	}
}
