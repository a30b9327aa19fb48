//go:build linux

package bench

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
)

// BenchmarkDaemonManyClients runs clients=N connections from procs=P
// processes at once, each connection in a goroutine of its own making
// b.N one-key calls (ReserveRead and FinishRead in turn, each timed) on a
// key of its own, and reports the p50 and p99 of every call of every
// connection, in µs. The processes are this test binary again, in the
// role manyClientsChild (see TestMain); they dial, warm up, report ready,
// and start on one line from the parent, so process start-up is not
// measured. procs=8/clients=64 ÷ procs=1/clients=1 is how a one-key call's
// tail grows with 64 engine ranks on one daemon.
func BenchmarkDaemonManyClients(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("the calls run in other processes")
	}
	for _, c := range []struct{ procs, clients int }{{1, 1}, {8, 64}} {
		b.Run(fmt.Sprintf("procs=%d/clients=%d", c.procs, c.clients), func(b *testing.B) {
			s, _ := startDaemon(b, 64<<20, l1.Config{})
			exe, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			per := c.clients / c.procs
			type child struct {
				cmd *exec.Cmd
				in  io.WriteCloser
				out *bufio.Reader
			}
			kids := make([]child, c.procs)
			for p := range kids {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%d", manyClientsEnv, s.SocketPath(), per, b.N, p))
				cmd.Stderr = os.Stderr
				in, err := cmd.StdinPipe()
				if err != nil {
					b.Fatal(err)
				}
				out, err := cmd.StdoutPipe()
				if err != nil {
					b.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				kids[p] = child{cmd, in, bufio.NewReader(out)}
				b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			}
			for p, k := range kids {
				if line, err := k.out.ReadString('\n'); err != nil || line != "ready\n" {
					b.Fatalf("child %d: %q, %v", p, line, err)
				}
			}
			b.ResetTimer()
			for _, k := range kids {
				if _, err := io.WriteString(k.in, "go\n"); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			var mu sync.Mutex
			var wg sync.WaitGroup
			for p, k := range kids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := readLatencies(k.out)
					if err != nil {
						b.Errorf("child %d: %v", p, err)
					}
					mu.Lock()
					lat = append(lat, got...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			b.StopTimer()
			for p, k := range kids {
				if err := k.cmd.Wait(); err != nil {
					b.Fatalf("child %d: %v", p, err)
				}
			}
			if want := c.clients * b.N; len(lat) != want {
				b.Fatalf("%d latencies, want %d", len(lat), want)
			}
			reportLatencyUS(b, lat)
		})
	}
}

// manyClientsEnv names the child role's arguments: socket, clients, calls
// per client, and the process's index (for keys of its own).
const manyClientsEnv = "KVALLOC_BENCH_MANY_CLIENTS"

// manyClientsChild is a child of BenchmarkDaemonManyClients: it dials its
// clients, each finishes a key of its own and warms up, prints "ready",
// waits for a line on stdin, makes its calls, and writes every call's
// latency (ns, 8 bytes little-endian) to stdout, after a count.
func manyClientsChild(arg string) error {
	f := strings.Split(arg, ",")
	if len(f) != 4 {
		return fmt.Errorf("%s=%q: want socket,clients,calls,index", manyClientsEnv, arg)
	}
	n, err1 := strconv.Atoi(f[1])
	calls, err2 := strconv.Atoi(f[2])
	idx, err3 := strconv.Atoi(f[3])
	if err1 != nil || err2 != nil || err3 != nil || n < 1 || calls < 0 {
		return fmt.Errorf("%s=%q: bad numbers", manyClientsEnv, arg)
	}
	cs := make([]*client.Client, n)
	ks := make([][]l1.ObjectKey, n)
	for i := range cs {
		c, err := client.Dial(f[0], client.Options{Timeout: time.Minute})
		if err != nil {
			return err
		}
		defer c.Close()
		k := cycleKeys(1, uint64(9000+idx*1000+i))
		res, err := c.ReserveWrite(k, nil, 4096, l1.ModeAll)
		if err != nil || res[0].Status != client.Status(l1.OK) {
			return fmt.Errorf("reserve: %v %v", res, err)
		}
		if _, err := c.FinishWrite(k, []client.Lease{res[0].Lease}); err != nil {
			return err
		}
		cs[i], ks[i] = c, k
	}
	lat := make([][]time.Duration, n)
	run := func(i, calls int) error {
		c, k := cs[i], ks[i]
		var lease []client.Lease
		for j := range calls {
			t0 := time.Now()
			if j%2 == 0 {
				res, err := c.ReserveRead(k, 1)
				if err != nil || res[0].Status != client.Status(l1.OK) {
					return fmt.Errorf("ReserveRead: %v %v", res, err)
				}
				lease = []client.Lease{res[0].Lease}
			} else if sts, err := c.FinishRead(k, lease, 1); err != nil || sts[0] != client.Status(l1.OK) {
				return fmt.Errorf("FinishRead: %v %v", sts, err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
		if calls%2 == 1 {
			_, err := c.FinishRead(k, lease, 1)
			return err
		}
		return nil
	}
	for i := range cs { // warm
		if err := run(i, 20); err != nil {
			return err
		}
		lat[i] = make([]time.Duration, 0, calls)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = run(i, calls) }()
	}
	wg.Wait()
	w := bufio.NewWriter(os.Stdout)
	var b [8]byte
	total := 0
	for i := range lat {
		if errs[i] != nil {
			return errs[i]
		}
		total += len(lat[i])
	}
	binary.LittleEndian.PutUint64(b[:], uint64(total))
	w.Write(b[:])
	for _, l := range lat {
		for _, d := range l {
			binary.LittleEndian.PutUint64(b[:], uint64(d))
			w.Write(b[:])
		}
	}
	return w.Flush()
}

// readLatencies reads a child's latencies.
func readLatencies(r io.Reader) ([]time.Duration, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return nil, fmt.Errorf("the count: %w", err)
	}
	n := binary.LittleEndian.Uint64(b[:])
	if n > 1<<30 {
		return nil, fmt.Errorf("a count of %d", n)
	}
	out := make([]time.Duration, n)
	for i := range out {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("latency %d of %d: %w", i, n, err)
		}
		out[i] = time.Duration(binary.LittleEndian.Uint64(b[:]))
	}
	return out, nil
}

// reportLatencyUS reports the p50 and p99 of lat in µs.
func reportLatencyUS(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / 1e3
	}
	b.ReportMetric(q(0.50), "p50-us")
	b.ReportMetric(q(0.99), "p99-us")
}
