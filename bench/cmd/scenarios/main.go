// Command scenarios replays cache-incident scenarios against every L1
// policy and prints what each policy did.
//
// Usage:
//
//	scenarios [flags] FILE...
//
// Each FILE is a scenario in the format of testdata/scenarios/FORMAT.md.
// Every scenario runs under every policy of the matrix prefix {none,
// binarysearch, onepass} × placement {contiguous, scattered,
// contiguous-first} × eviction {periodic, on-demand}, on simulated time,
// with the real allocator and l1 packages (see package
// github.com/kvalloc/kvalloc/bench/scenario). Runs are independent and
// deterministic; they are spread over -j goroutines.
//
// The command prints one table per scenario on stdout. With -out DIR it
// also writes DIR/scenarios.md, the same tables in markdown, and, for each
// scenario with a plot directive, DIR/NAME.svg and DIR/NAME.png. A run
// that lasts more than a few seconds reports its progress on stderr.
//
// Flags:
//
//	-out DIR           where scenarios.md and the plots go; "" writes none (default "bench/out")
//	-policies PATTERN  PREFIX/PLACEMENT/EVICTION, parts may be * (default: all 18)
//	-fill MODE         how restored objects are written: ends, full or none (default ends)
//	-max-traffic D     cut every traffic operation to D of simulated time (default: no cut)
//	-check             compare the runner's model with l1 after every operation (slow)
//	-j N               concurrent runs (default GOMAXPROCS)
//
// Scenarios exits 0 on success and for -h, and 1 on any error.
//
// Example, as make scenarios runs it:
//
//	go run ./bench/cmd/scenarios -out bench/out testdata/scenarios/*.scn
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvalloc/kvalloc/bench/scenario"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// exitCode is the exit status for run's error: 0 for success and for -h
// (as the other tools under bench/cmd), 1 for anything else, which it
// prints.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintln(stderr, "scenarios:", err)
	return 1
}

// progressAfter is how long a run goes before it reports progress, and
// then how often.
const progressAfter = 3 * time.Second

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scenarios", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "bench/out", "directory for scenarios.md and the plots; empty writes none")
	pattern := fs.String("policies", "", "policy pattern PREFIX/PLACEMENT/EVICTION, parts may be * (default all)")
	fillName := fs.String("fill", "ends", "how restored objects are written: ends, full or none")
	maxTraffic := fs.Duration("max-traffic", 0, "cut every traffic operation to this much simulated time (0: no cut)")
	check := fs.Bool("check", false, "compare the runner's model with l1 after every operation (slow)")
	workers := fs.Int("j", runtime.GOMAXPROCS(0), "concurrent runs")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: scenarios [flags] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("no scenario files")
	}
	fill, err := scenario.ParseFill(*fillName)
	if err != nil {
		return err
	}
	pols, err := scenario.MatchPolicies(*pattern)
	if err != nil {
		return err
	}
	var scs []*scenario.Scenario
	for _, path := range fs.Args() {
		sc, err := scenario.ParseFile(path)
		if err != nil {
			return err
		}
		for _, old := range scs {
			if old.Name == sc.Name {
				return fmt.Errorf("%s: scenario %q also in %s", path, sc.Name, old.File)
			}
		}
		scs = append(scs, sc)
	}

	var sim, finished atomic.Int64
	var total time.Duration
	for _, sc := range scs {
		total += time.Duration(len(pols)) * sc.Duration(*maxTraffic)
	}
	opt := scenario.Options{Fill: fill, MaxTraffic: *maxTraffic, Check: *check, Progress: &sim, Finished: &finished}
	start := time.Now()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(progressAfter)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				pct := 100.0
				if total > 0 {
					pct = 100 * float64(sim.Load()) / float64(total)
				}
				fmt.Fprintf(stderr, "scenarios: %d/%d runs done, %.0f%% of simulated time, %s elapsed\n",
					finished.Load(), len(scs)*len(pols), pct, time.Since(start).Round(time.Second))
			}
		}
	}()
	results, err := scenario.RunMatrix(scs, pols, opt, *workers)
	close(stop)
	<-done
	if err != nil {
		return err
	}
	elapsed := time.Since(start)

	if err := scenario.WriteText(stdout, scs, results); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d scenarios × %d policies in %s on %d goroutines (GOMAXPROCS %d)\n",
		len(scs), len(pols), elapsed.Round(time.Millisecond), *workers, runtime.GOMAXPROCS(0))
	if *out == "" {
		return nil
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	var md bytes.Buffer
	if err := scenario.WriteMarkdown(&md, scs, results, preamble(fs.Args(), *maxTraffic, fill, elapsed, *workers)); err != nil {
		return err
	}
	mdPath := filepath.Join(*out, "scenarios.md")
	if err := os.WriteFile(mdPath, md.Bytes(), 0o644); err != nil {
		return err
	}
	written := []string{mdPath}
	for _, sc := range scs {
		if sc.Plot == nil {
			continue
		}
		for _, ext := range []string{".svg", ".png"} {
			p := filepath.Join(*out, sc.Name+ext)
			if err := scenario.WritePlotFile(p, sc, results); err != nil {
				return err
			}
			written = append(written, p)
		}
	}
	fmt.Fprintf(stdout, "wrote %s\n", strings.Join(written, ", "))
	return nil
}

// preamble heads scenarios.md: how it was made and what the columns mean.
func preamble(files []string, maxTraffic time.Duration, fill scenario.Fill, elapsed time.Duration, workers int) string {
	var b strings.Builder
	b.WriteString("# Scenario replays\n\n")
	b.WriteString("Generated by `go run ./bench/cmd/scenarios")
	if maxTraffic > 0 {
		fmt.Fprintf(&b, " -max-traffic %s", maxTraffic)
	}
	if fill != scenario.FillEnds {
		fmt.Fprintf(&b, " -fill %s", fill)
	}
	for _, f := range files {
		b.WriteString(" " + filepath.ToSlash(f))
	}
	fmt.Fprintf(&b, "` (%s %s/%s, %d CPUs, %d concurrent runs, %s in all). ",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), workers, elapsed.Round(time.Millisecond))
	b.WriteString("Every number but wall time is deterministic. ")
	b.WriteString("Scenario format: `testdata/scenarios/FORMAT.md`.\n\n")
	b.WriteString("Columns, per scenario and policy (PREFIX/PLACEMENT/EVICTION); a reservation call is one ReserveWrite with keys to allocate:\n\n")
	b.WriteString("- **requested**, **granted**, **OOM keys**: keys that needed memory, got it, and were answered OutOfMemory.\n")
	b.WriteString("- **grant/oracle**: granted ÷ the oracle, the sum over calls of min(n, ⌊(free + evictable bytes) ÷ object size⌋) from the state each call met: what a policy that may evict every unlocked object and place objects anywhere could have granted. It scores stores only, not what the cache kept for later reads.\n")
	b.WriteString("- **read hits**, **read hit rate**: keys of reads (read, reserve-read, traffic reads) that were resident and readable, and their share of the keys read (– when the scenario reads nothing).\n")
	b.WriteString("- **failed calls**: calls with at least one OOM key (LMCache logs one \"Failed to allocate\" each); **failed w/ free**: those that gave up while the allocator had enough free bytes for the whole call.\n")
	b.WriteString("- **alloc calls**, **probes**: l1's calls into the allocator and the binary search's trial allocations.\n")
	b.WriteString("- **evictions**: by the periodic sweep or on demand.\n")
	b.WriteString("- **peak frag**, **mean frag**: 1 − largest free extent ÷ free bytes, after every operation.\n")
	b.WriteString("- **wall**: real time of the replay; runs share the CPUs.\n")
	return b.String()
}
