// Example serves kvalloc's metrics on 127.0.0.1: a segmented pool that
// becomes ready in the background, an allocator and an l1 manager over it,
// a small workload that keeps the counters moving, and /metrics.
//
// Usage:
//
//	go run ./metrics/example [-addr 127.0.0.1:9464] [-pool 1GiB-in-bytes] [-pin none|mlock] [-once]
//
// With -once it prints one scrape to stdout, after the pool is ready and
// the workload has run three rounds, and exits. The address must be a loopback
// one: the example never listens on other interfaces.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9464", "loopback address to serve /metrics on")
	pool := fs.Int64("pool", 256<<20, "pool size in bytes")
	pin := fs.String("pin", "none", "pin the pool's segments: none or mlock")
	once := fs.Bool("once", false, "print one scrape to stdout and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkLoopback(*addr); err != nil {
		return err
	}
	mode := hostmem.PinNone
	switch *pin {
	case "none":
	case "mlock":
		mode = hostmem.PinLock
	default:
		return fmt.Errorf("-pin %q: want none or mlock", *pin)
	}

	var (
		region   allocator.Region
		progress metrics.RegionSource
	)
	seg, err := hostmem.NewSegmentedRegion(*pool, hostmem.SegmentedOptions{SegmentSize: 16 << 20, Pin: mode})
	switch {
	case err == nil:
		region, progress = seg, seg
	case errors.Is(err, errors.ErrUnsupported):
		fmt.Fprintf(os.Stderr, "example: %v; serving a heap pool instead\n", err)
		if region, err = hostmem.NewHeapRegion(*pool); err != nil {
			return err
		}
	default:
		return err
	}
	alloc, err := allocator.New(region, allocator.Options{})
	if err != nil {
		region.Close()
		return err
	}
	defer alloc.Close()
	mgr, err := l1.New[string](alloc, l1.Config{})
	if err != nil {
		return err
	}
	defer mgr.Close()

	reg := prometheus.NewRegistry()
	if err := reg.Register(metrics.New(metrics.Options{
		Allocator: alloc, Region: progress, L1: metrics.L1(mgr),
		ConstLabels: prometheus.Labels{"pool": "example"},
	})); err != nil {
		return err
	}

	if *once {
		if seg != nil {
			if err := seg.Wait(ctx); err != nil {
				return err
			}
		}
		for round := range 3 {
			workload(mgr, round)
		}
		return scrape(reg, stdout)
	}

	go func() {
		for round := 0; ctx.Err() == nil; round++ {
			workload(mgr, round)
			time.Sleep(time.Second)
		}
	}()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(stdout, "serving http://%s/metrics (Ctrl-C stops)\n", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkLoopback refuses an address that is not on a loopback interface.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-addr %q: the example serves on a loopback address only (127.0.0.1, ::1, localhost)", addr)
	}
	return nil
}

// workload asks for 40 objects of 4 MiB, finishes 30, reads 10 and
// deletes 20, so that a few rounds fill a small pool and the eviction and
// failure counters move too.
func workload(m *l1.Manager[string], round int) {
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("r%d-k%d", round, i)
	}
	res, err := m.ReserveWrite(keys, nil, 4<<20, l1.ModeAll)
	if err != nil {
		return
	}
	leases := make([]l1.Lease, len(res))
	for i, r := range res {
		leases[i] = r.Lease
	}
	_, _ = m.FinishWrite(keys[:30], leases[:30])
	if res, err := m.ReserveRead(keys[:10], 1); err == nil {
		for i, r := range res {
			if r.Status == l1.OK {
				_, _ = m.FinishRead(keys[i:i+1], []l1.Lease{r.Lease}, 1)
			}
		}
	}
	_, _ = m.Delete(keys[:20], false)
}

// scrape writes the registry's metrics in the text exposition format.
func scrape(reg *prometheus.Registry, w io.Writer) error {
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	_, err = w.Write(buf.Bytes())
	return err
}
