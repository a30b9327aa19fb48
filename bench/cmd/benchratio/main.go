// Benchratio prints kvalloc's benchmark targets as ratios against the
// floors measured in the same run.
//
// Usage:
//
//	benchratio [-strict] [-md FILE] [-record DIR [-commit SHA [-dirty]]] bench.txt...
//	benchratio -history DIR -plot OUT
//	benchratio -targets
//
// It reads Go benchmark results (the output of `go test -bench`, as `make
// bench` writes to bench/out/bench.txt) with golang.org/x/perf/benchfmt,
// takes the median of every benchmark's samples of every unit, and prints one
// row per target of docs/HARNESS.md's ratio table: the measure, the median, the
// floor or base it is divided by, the ratio, the target and PASS or MISS.
// Rows marked "info" carry no target; they put the other regions and
// placements in the same light. A benchmark absent from the input, for
// example because its region is unavailable here and it skipped, gives a row
// that says so and neither passes nor misses.
//
// Ratios are of medians from one run, so the machine's noise hits a result
// and its floor alike; a ratio is still only as steady as the medians it
// divides.
//
// Names are matched without their -GOMAXPROCS suffix, so give it results of
// one -cpu value.
//
// The flags are:
//
//	-strict
//		Exit 1 when any target is missed (default: report and exit 0).
//	-md FILE
//		Also write the table, with results, as markdown to FILE (make
//		bench writes bench/out/ratios.md).
//	-record DIR
//		Also append the run, its one input file, to the benchmark
//		history DIR (see package
//		github.com/kvalloc/kvalloc/bench/internal/history): to
//		DIR/COMMIT.txt, after the configuration lines
//
//			commit: <full hash of the commit measured>
//			date: <now, RFC 3339, UTC>
//			dirty: <true when the tree had uncommitted changes to tracked files>
//
//		so every result carries its commit and run. make bench
//		records every suite in BENCH_HISTORY (bench/history,
//		untracked; CI keeps it as an artifact).
//	-commit SHA
//		With -record: the commit to file the run under (default:
//		git rev-parse HEAD, and the dirty flag from git status;
//		outside git, "unknown"). make bench records HEAD when it
//		builds the benchmarks and passes it, so that a commit made
//		during the run does not take the results.
//	-dirty
//		With -commit: the tree had uncommitted changes to tracked
//		files.
//	-history DIR -plot OUT
//		Read a benchmark history, compute every target's ratio in
//		every run, and draw each over the runs into OUT/NAME.svg and
//		OUT/NAME.png, with OUT/history.md as the table of the same
//		numbers. A slow drift that no pairwise gate sees shows there
//		(make bench-history).
//	-targets
//		Print the targets alone, from the definitions below, as the
//		markdown table docs/HARNESS.md carries, and read no input. The
//		document's copy is checked by TestReadmeTargets, so it cannot
//		drift from these definitions; the results live in bench/out.
//
// Benchratio exits 2 on a usage error, unreadable input or a history it
// cannot write.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchratio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	strict := fs.Bool("strict", false, "exit 1 when a target is missed")
	mdPath := fs.String("md", "", "also write the table as markdown to `FILE`")
	targetsOnly := fs.Bool("targets", false, "print the targets as a markdown table and exit")
	historyDir := fs.String("history", "", "plot every target's ratio over the runs in history `DIR` (with -plot)")
	plotDir := fs.String("plot", "", "with -history: write the plots and history.md to `DIR`")
	recordDir := fs.String("record", "", "also append the input to the history `DIR`")
	commit := fs.String("commit", "", "with -record: file the run under `SHA` (default: git HEAD)")
	dirty := fs.Bool("dirty", false, "with -commit: the tree had uncommitted changes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: benchratio [-strict] [-md FILE] [-record DIR [-commit SHA [-dirty]]] bench.txt...\n       benchratio -history DIR -plot OUT\n       benchratio -targets\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *recordDir == "" && (*commit != "" || *dirty) || *commit == "" && *dirty {
		fmt.Fprintf(stderr, "benchratio: -commit goes with -record, -dirty with -commit\n")
		return 2
	}
	if *recordDir != "" && fs.NArg() != 1 {
		fmt.Fprintf(stderr, "benchratio: -record takes one results file, got %d\n", fs.NArg())
		return 2
	}
	if *historyDir != "" || *plotDir != "" {
		if *historyDir == "" || *plotDir == "" || fs.NArg() > 0 || *recordDir != "" {
			fmt.Fprintf(stderr, "benchratio: -history and -plot go together, without input files\n")
			return 2
		}
		return plotHistory(*historyDir, *plotDir, stdout, stderr)
	}
	if *targetsOnly {
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "benchratio: -targets reads no input\n")
			return 2
		}
		io.WriteString(stdout, targetsMarkdown(targets))
		return 0
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "benchratio: no input files\n")
		fs.Usage()
		return 2
	}
	s := samples{}
	for _, path := range fs.Args() {
		if err := s.readFile(path); err != nil {
			fmt.Fprintf(stderr, "benchratio: %v\n", err)
			return 2
		}
	}
	if len(s) == 0 {
		fmt.Fprintf(stderr, "benchratio: no benchmark results in %s\n", strings.Join(fs.Args(), ", "))
		return 2
	}
	rows := evaluate(s, targets)
	if err := writeTable(stdout, rows, s); err != nil {
		fmt.Fprintf(stderr, "benchratio: %v\n", err)
		return 2
	}
	if *mdPath != "" {
		if err := os.WriteFile(*mdPath, []byte(resultsMarkdown(rows, s)), 0o644); err != nil {
			fmt.Fprintf(stderr, "benchratio: %v\n", err)
			return 2
		}
	}
	if *recordDir != "" {
		if code := record(*recordDir, *commit, *dirty, fs.Arg(0), stdout, stderr); code != 0 {
			return code
		}
	}
	if *strict && slices.ContainsFunc(rows, func(r row) bool { return r.verdict == verdictMiss }) {
		return 1
	}
	return 0
}

// samples holds every value read, by benchmark name (without "Benchmark"
// and without the GOMAXPROCS suffix) and then by unit as printed.
type samples map[string]map[string][]float64

func (s samples) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return s.read(f, path)
}

func (s samples) read(r io.Reader, name string) error {
	br := benchfmt.NewReader(r, name)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.Result:
			s.add(rec)
		case *benchfmt.SyntaxError:
			// Not a result line we understand: go test's own chatter
			// and -v output are full of them.
		}
	}
	return br.Err()
}

// add records the values of rec.
func (s samples) add(rec *benchfmt.Result) {
	key := stripProcs(rec.Name)
	units := s[key]
	if units == nil {
		units = map[string][]float64{}
		s[key] = units
	}
	for _, v := range rec.Values {
		unit, val := v.Unit, v.Value
		if v.OrigUnit != "" {
			unit, val = v.OrigUnit, v.OrigValue
		}
		units[unit] = append(units[unit], val)
	}
}

// stripProcs returns the name without its -GOMAXPROCS suffix.
func stripProcs(n benchfmt.Name) string {
	base, parts := n.Parts()
	var b strings.Builder
	b.Write(base)
	for _, p := range parts {
		if len(p) > 0 && p[0] == '-' {
			continue
		}
		b.Write(p)
	}
	return b.String()
}

// median returns the median of name's samples of unit and how many there
// were.
func (s samples) median(name, unit string) (float64, int, bool) {
	vs := s[name][unit]
	if len(vs) == 0 {
		return 0, 0, false
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 1 {
		return vs[m], len(vs), true
	}
	return (vs[m-1] + vs[m]) / 2, len(vs), true
}

// A measure is one median: a benchmark and a unit.
type measure struct {
	name, unit string
}

func (m measure) String() string { return m.name + " " + m.unit }

// A target compares a measure with a floor (ratio = num / den) or, when den
// is zero, checks the measure itself (ratio = num). An op of "" makes the
// row informative only; such a row with report set is a number kvalloc
// tracks without a bound (how a path scales with a second core), and the
// ratio table of docs/HARNESS.md lists it as "reported".
type target struct {
	num, den measure
	op       string // "<=", ">=", "==" or "" for info
	bound    float64
	note     string
	report   bool
}

type verdict string

const (
	verdictPass    verdict = "PASS"
	verdictMiss    verdict = "MISS"
	verdictInfo    verdict = "info"
	verdictMissing verdict = "n/a"
)

type row struct {
	target
	numV, denV float64
	ratio      float64
	verdict    verdict
	why        string
}

// targets is docs/HARNESS.md's ratio table (TestReadmeTargets holds the two
// equal), then the rows that put the other variants of each benchmark in
// the same light.
var targets = []target{
	// The Allocate+Free pair of one 8 MiB block against the bump floor:
	// Floor/mutex swings 4× with load on shared machines, so the pair's
	// ratio to it is shown below as information only.
	{num: m("Allocate/region=heap", "ns/op"), den: m("Floor/bump", "ns/op"), op: "<=", bound: 20},
	{num: m("AllocateBatch/region=heap/placement=scattered/n=5700", "ns/block"), den: m("Floor/bump", "ns/op"), op: "<=", bound: 5},
	// A fully ready segmented region costs the allocator what an mmap
	// region does: it is asked nothing per call.
	{num: m("Allocate/region=segmented", "ns/op"), den: m("Allocate/region=mmap", "ns/op"), op: "<=", bound: 1.1},
	// Production sizes: 5700 × 8 MiB in a 45 GiB NoReserve pool.
	{num: m(pool8MiB+"/op=batch-warm", "ns/block"), den: m("Floor/bump", "ns/op"), op: "<=", bound: 5},
	{num: m(pool8MiB+"/op=batch-fresh", "ns/block"), den: m("Floor/bump", "ns/op"), op: "<=", bound: 10},
	{num: m(pool8MiB+"/op=batch-fresh", "ns/block"), den: m(pool8MiB+"/op=batch-warm", "ns/block"), op: "<=", bound: 2},
	{num: m(pool8MiB+"/op=free", "ns/block"), den: m("Floor/bump", "ns/op"), op: "<=", bound: 5},
	{num: m(pool8MiB+"/op=batch-warm", "ns/block"), den: m("AllocatorPool/object=16KiB/pool=45GiB/op=batch-warm", "ns/block"), op: "<=", bound: 1.5},
	{num: m("AllocatorPool/object=8MiB/pool=1TiB/op=new", "ns/op"), den: m(pool8MiB+"/op=new", "ns/op"), op: "<=", bound: 2},
	{num: m("Fragmented/extents=100000/op=single", "ns/op"), den: m("Fragmented/extents=1000/op=single", "ns/op"), op: "<=", bound: 2},
	{num: m("Fragmented/extents=100000/op=batch", "ns/op"), den: m("Fragmented/extents=1000/op=batch", "ns/op"), op: "<=", bound: 2},
	{num: m("PrefixRecovery/strategy=onepass/n=5700", "ns/op"), den: m("PrefixRecovery/fit/n=4560", "ns/op"), op: "<=", bound: 1.2,
		note: "granting 4560 of 5700 costs what a fitting 4560 does"},
	{num: m("PrefixRecovery/strategy=binarysearch/n=5700", "alloc-ns/op"), den: m("PrefixRecovery/strategy=onepass/n=5700", "alloc-ns/op"), op: ">=", bound: 10,
		note: "allocator time inside the search"},
	{num: m("PrefixRecovery/strategy=onepass/n=5700", "probes/op"), op: "==", bound: 0},
	{num: m("PrefixRecovery/strategy=onepass/n=5700", "granted/op"), op: "==", bound: 4560},
	{num: m("L1Cycle/keys=256", "ns/key"), den: m("Floor/map", "ns/key"), op: "<=", bound: 4},
	{num: m("L1Cycle/keys=5700", "ns/key"), den: m("Floor/map", "ns/key"), op: "<=", bound: 4},
	{num: m("L1Cycle/size=8MiB/keys=5700", "ns/key"), den: m("Floor/map", "ns/key"), op: "<=", bound: 2},
	{num: m("EvictOnDemand/victims=scattered", "ns/op"), den: m("EvictOnDemand/victims=adjacent", "ns/op"), op: "<=", bound: 2},
	{num: m("EvictPastLocked/cold=temporary", "ns/op"), den: m("EvictPastLocked/cold=none", "ns/op"), op: "<=", bound: 1.5},
	{num: m("EvictPastLocked/cold=read-locked", "ns/op"), den: m("EvictPastLocked/cold=none", "ns/op"), op: "<=", bound: 1.5},
	// A store batch of 57 chains × 100 keys, chain-major: ranking by
	// chain position costs what LRU's append does, whatever the order.
	{num: m("PolicyBatch/policy=prefix/op=finish-write", "ns/op"), den: m("PolicyBatch/policy=lru/op=finish-write", "ns/op"), op: "<=", bound: 1.5},
	{num: m("PolicyBatch/policy=prefix/op=read", "ns/op"), den: m("PolicyBatch/policy=lru/op=read", "ns/op"), op: "<=", bound: 1.5},
	{num: m("Fill/region=pinned", "GB/s"), den: m("Floor/copy", "GB/s"), op: ">=", bound: 0.9},
	{num: m("Allocate/region=heap", "allocs/op"), op: "==", bound: 0},
	{num: m("Allocate/region=pinned", "allocs/op"), op: "==", bound: 0},
	{num: m("SegmentPin/pin=mlock/workers=2", "first-ns"), den: m("SegmentPin/pin=mlock/workers=2", "full-ns"), op: "<=", bound: 0.1},
	{num: m("SegmentPin/pin=mlock/workers=2", "GiB/s"), den: m("SegmentPin/pin=mlock/workers=1", "GiB/s"), op: ">=", bound: 1.6},
	// The node daemon: the production cycle through client/ and a Unix
	// socket against the same cycle in process, and a one-key call
	// against an empty one on the same socket.
	{num: m("DaemonCycle/size=8MiB/keys=5700", "ns/key"), den: m("L1Cycle/size=8MiB/keys=5700", "ns/key"), op: "<=", bound: 1.5},
	{num: m("DaemonCycle/size=8MiB/keys=5700", "cpu-ns/key"), den: m("L1Cycle/size=8MiB/keys=5700", "cpu-ns/key"), report: true,
		note: "the same cycle on CPU time: client, daemon and collector against caller, manager and collector"},
	{num: m("DaemonCycleV2/size=8MiB/keys=5700", "cpu-ns/key"), den: m("L1Cycle/size=8MiB/keys=5700", "cpu-ns/key"), report: true,
		note: "protocol version 2, the finished keys named by handle"},
	{num: m("DaemonCycleV2/size=8MiB/keys=5700", "cpu-ns/key"), den: m("DaemonCycle/size=8MiB/keys=5700", "cpu-ns/key"), report: true,
		note: "what key handles (version 2) cost or save against version 1, the client's default"},
	{num: m("DaemonRoundTrip/op=reserve-finish", "ns/rtt"), den: m("DaemonRoundTrip/op=ping", "ns/rtt"), op: "<=", bound: 1.5},
	// The L2 tier on a real Redis Cluster: an L1 hit (32 keys) with L2 on
	// against off; then L2 get and put throughput of 8 MiB objects
	// through the daemon in pieces against a plain pipelined GET and SET
	// loop of the same pieces with go-redis's client on the same store
	// (plain-GB/s) and against the daemon on whole values, the path
	// before pieces (whole-GB/s), both daemons with MACs as in
	// production, and in pieces without a MAC (nomac-GB/s), the four
	// alternated op by op in one benchmark, on 3 masters, then 1 and 6;
	// then the smaller blocks.
	{num: m("L2Hit/l2=on", "ns/op"), den: m("L2Hit/l2=off", "ns/op"), op: "<=", bound: 1.1},
	{num: m(l2get8+"/masters=3", "GB/s"), den: m(l2get8+"/masters=3", "plain-GB/s"), op: ">=", bound: 0.9},
	{num: m(l2put8+"/masters=3", "GB/s"), den: m(l2put8+"/masters=3", "plain-GB/s"), op: ">=", bound: 0.9},
	{num: m(l2get8+"/masters=3", "GB/s"), den: m(l2get8+"/masters=3", "whole-GB/s"), op: ">=", bound: 2,
		note: "pieces against whole values"},
	{num: m(l2put8+"/masters=3", "GB/s"), den: m(l2put8+"/masters=3", "whole-GB/s"), report: true, note: "pieces against whole values"},
	{num: m(l2get8+"/masters=3", "GB/s"), den: m(l2get8+"/masters=3", "nomac-GB/s"), report: true, note: "pieces with MACs against without: what the MAC costs"},
	{num: m(l2put8+"/masters=3", "GB/s"), den: m(l2put8+"/masters=3", "nomac-GB/s"), report: true, note: "pieces with MACs against without: what the MAC costs"},
	{num: m(l2get8+"/masters=1", "GB/s"), den: m(l2get8+"/masters=1", "plain-GB/s"), report: true, note: "one Redis"},
	{num: m(l2put8+"/masters=1", "GB/s"), den: m(l2put8+"/masters=1", "plain-GB/s"), report: true, note: "one Redis"},
	{num: m(l2get8+"/masters=1", "GB/s"), den: m(l2get8+"/masters=1", "whole-GB/s"), report: true, note: "one Redis, pieces against whole values"},
	{num: m(l2get8+"/masters=6", "GB/s"), den: m(l2get8+"/masters=6", "plain-GB/s"), report: true, note: "6 masters"},
	{num: m(l2put8+"/masters=6", "GB/s"), den: m(l2put8+"/masters=6", "plain-GB/s"), report: true, note: "6 masters"},
	{num: m(l2get8+"/masters=6", "GB/s"), den: m(l2get8+"/masters=6", "whole-GB/s"), report: true, note: "6 masters, pieces against whole values"},
	{num: m("L2Get/path=daemon/size=1MiB/masters=3", "GB/s"), den: m("L2Get/path=daemon/size=1MiB/masters=3", "plain-GB/s"), report: true, note: "1 MiB blocks"},
	{num: m("L2Get/path=daemon/size=64KiB/masters=3", "GB/s"), den: m("L2Get/path=daemon/size=64KiB/masters=3", "plain-GB/s"), report: true, note: "64 KiB blocks"},
	{num: m("L2Put/path=daemon/size=1MiB/masters=3", "GB/s"), den: m("L2Put/path=daemon/size=1MiB/masters=3", "plain-GB/s"), report: true, note: "1 MiB blocks"},
	{num: m("L2Put/path=daemon/size=64KiB/masters=3", "GB/s"), den: m("L2Put/path=daemon/size=64KiB/masters=3", "plain-GB/s"), report: true, note: "64 KiB blocks"},
	{num: m("L2Get/path=daemon/size=1MiB/masters=3", "GB/s"), den: m("L2Get/path=daemon/size=1MiB/masters=3", "whole-GB/s"), report: true, note: "1 MiB blocks, pieces against whole values"},
	{num: m("L2Get/path=daemon/size=64KiB/masters=3", "GB/s"), den: m("L2Get/path=daemon/size=64KiB/masters=3", "whole-GB/s"), report: true, note: "64 KiB blocks, pieces against whole values"},
	// Many engines on one daemon: a one-key call's p99 (ms) while another
	// connection sends 10,000-key frames back to back, and its growth with
	// 64 connections from 8 processes.
	{num: m("DaemonFairness/flood=10000/op=read", "p99-ms"), op: "<=", bound: 10,
		note: "a one-key call's p99 in ms, another connection flooding 10,000-key reads"},
	{num: m("DaemonFairness/flood=10000/op=write", "p99-ms"), op: "<=", bound: 10,
		note: "the same, flooding 10,000-key writes"},
	{num: m("DaemonFairness/flood=10000/op=read", "p99-ms"), den: m("DaemonFairness/flood=0", "p99-ms"), report: true,
		note: "the same p99 against no flood"},
	{num: m("DaemonManyClients/procs=8/clients=64", "p99-us"), den: m("DaemonManyClients/procs=1/clients=1", "p99-us"), report: true,
		note: "a one-key call's p99, 64 connections from 8 processes against 1"},
	// Contention: ops/s on two cores ÷ on one, one manager or allocator
	// shared by b.RunParallel's goroutines; reported, no bound (l1/DESIGN.md,
	// "Contention").
	{num: m("Contention/op=lookup/procs=2", "ops/s"), den: m("Contention/op=lookup/procs=1", "ops/s"), report: true,
		note: "ReserveReadPrefix + FinishRead"},
	{num: m("Contention/op=store/procs=2", "ops/s"), den: m("Contention/op=store/procs=1", "ops/s"), report: true,
		note: "ReserveWrite + FinishWrite, evicting"},
	{num: m("Contention/op=allocate/procs=2", "ops/s"), den: m("Contention/op=allocate/procs=1", "ops/s"), report: true,
		note: "Allocate + Free"},
	{num: m("Contention/op=mutex/procs=2", "ops/s"), den: m("Contention/op=mutex/procs=1", "ops/s"), report: true,
		note: "one shared mutex: the floor of a one-lock design"},
	{num: m("Contention/op=ceiling/procs=2", "ops/s"), den: m("Contention/op=ceiling/procs=1", "ops/s"), report: true,
		note: "nothing shared: this run's ceiling for the rows above"},
	// The Python client's 5700-key 8 MiB cycle against the Go client's,
	// on one daemon.
	{num: m(pyClient+"/client=python/op=cycle", "ns/op"), den: m(pyClient+"/client=go/op=cycle", "ns/op"), op: "<=", bound: 2},
	{num: m(pyClient+"/client=python/op=ping", "ns/op"), den: m(pyClient+"/client=go/op=ping", "ns/op"), report: true,
		note: "Python's per-call overhead against an empty round trip"},

	{num: m("Allocate/region=heap", "ns/op"), den: m("Floor/mutex", "ns/op")},
	{num: m(pool8MiB+"/op=pair", "ns/op"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocatorPool/object=8MiB/pool=1TiB/op=batch-warm", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocatorPool/object=8MiB/pool=1TiB/op=batch-fresh", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocatorPool/object=8MiB/pool=1TiB/op=free", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocatorPool/object=1MiB/pool=45GiB/op=batch-warm", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocatorPool/object=40MiB/pool=45GiB/op=batch-warm", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocatorPool/object=40MiB/pool=1TiB/op=batch-fresh", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("Allocate/region=pinned", "ns/op"), den: m("Floor/mutex", "ns/op")},
	{num: m("Allocate/region=cuda-host", "ns/op"), den: m("Floor/mutex", "ns/op")},
	{num: m("AllocateBatch/region=heap/placement=scattered/n=256", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocateBatch/region=heap/placement=contiguous-first/n=5700", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocateBatch/region=heap/placement=contiguous/n=5700", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocateBatch/region=pinned/placement=scattered/n=5700", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("AllocateBatch/region=cuda-host/placement=scattered/n=5700", "ns/block"), den: m("Floor/bump", "ns/op")},
	{num: m("PrefixRecovery/strategy=binarysearch/n=5700", "ns/op"), den: m("PrefixRecovery/strategy=onepass/n=5700", "ns/op"),
		note: "end to end: both share the per-key work"},
	{num: m("PrefixRecovery/strategy=binarysearch/n=5700", "probes/op")},
	{num: m("PrefixRecovery/strategy=binarysearch/n=5700", "granted/op")},
	{num: m("PrefixRecovery/strategy=none/n=5700", "granted/op")},
	{num: m("L1CycleParallel", "ns/key"), den: m("Floor/map", "ns/key")},
	{num: m("Fill/region=heap", "GB/s"), den: m("Floor/copy", "GB/s")},
	{num: m("Fill/region=cuda-host", "GB/s"), den: m("Floor/copy", "GB/s")},
	{num: m("SegmentFloor/workers=2", "GiB/s"), den: m("SegmentFloor/workers=1", "GiB/s"), note: "the machine's parallel ceiling for the row above"},
	{num: m("SegmentPin/pin=none/workers=2", "first-ns"), den: m("SegmentPin/pin=none/workers=2", "full-ns")},
	{num: m("SegmentPin/pin=none/workers=2", "GiB/s"), den: m("SegmentPin/pin=none/workers=1", "GiB/s")},
	{num: m("SegmentPin/pin=cuda/workers=2", "first-ns"), den: m("SegmentPin/pin=cuda/workers=2", "full-ns")},
	{num: m("SegmentPin/pin=cuda/workers=2", "GiB/s"), den: m("SegmentPin/pin=cuda/workers=1", "GiB/s")},
	{num: m("DaemonClients/clients=8", "calls/s"), den: m("DaemonClients/clients=1", "calls/s"),
		note: "8 connections of 32-key batches against 1"},
	{num: m(pyClient+"/client=python/op=cycle-list", "ns/op"), den: m(pyClient+"/client=python/op=cycle", "ns/op"),
		note: "keys encoded by every call, not once per cycle"},
}

func m(name, unit string) measure { return measure{name, unit} }

// pool8MiB is BenchmarkAllocatorPool's production case: 8 MiB objects in a
// pool of 5700 of them (45 GiB).
const pool8MiB = "AllocatorPool/object=8MiB/pool=45GiB"

// l2get8 and l2put8 are BenchmarkL2Get's and BenchmarkL2Put's 8 MiB
// objects through the daemon; "/masters=N" names the store.
const (
	l2get8 = "L2Get/path=daemon/size=8MiB"
	l2put8 = "L2Put/path=daemon/size=8MiB"
)

// pyClient is BenchmarkPythonClient: the Python and the Go client on one
// daemon.
const pyClient = "PythonClient"

// evaluate computes every row from the medians in s.
func evaluate(s samples, ts []target) []row {
	rows := make([]row, 0, len(ts))
	for _, t := range ts {
		r := row{target: t, verdict: verdictInfo}
		num, _, ok := s.median(t.num.name, t.num.unit)
		if !ok {
			r.verdict, r.why = verdictMissing, "no "+t.num.String()+" (skipped or not run)"
			rows = append(rows, r)
			continue
		}
		r.numV, r.ratio = num, num
		if t.den.name != "" {
			den, _, ok := s.median(t.den.name, t.den.unit)
			if !ok {
				r.verdict, r.why = verdictMissing, "no "+t.den.String()+" (skipped or not run)"
				rows = append(rows, r)
				continue
			}
			r.denV = den
			if den == 0 {
				r.ratio = math.Inf(1)
			} else {
				r.ratio = num / den
			}
		}
		if t.op != "" {
			r.verdict = verdictMiss
			if check(r.ratio, t.op, t.bound) {
				r.verdict = verdictPass
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func check(v float64, op string, bound float64) bool {
	switch op {
	case "<=":
		return v <= bound
	case ">=":
		return v >= bound
	case "==":
		return v == bound
	}
	return false
}

// writeTable prints the rows: targets first, then the informative ones.
func writeTable(w io.Writer, rows []row, s samples) error {
	runs := 0
	for _, units := range s {
		for _, vs := range units {
			runs = max(runs, len(vs))
		}
	}
	fmt.Fprintf(w, "Ratios against in-run floors (medians of up to %d runs)\n\n", runs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tmedian\tfloor\tratio\ttarget\tresult")
	for _, r := range rows {
		name := r.num.name
		if r.den.name != "" {
			name += "  ÷  " + r.den.name
		}
		goal := r.goal()
		if r.verdict == verdictMissing {
			fmt.Fprintf(tw, "%s\t—\t—\t—\t%s\t%s: %s\n", name, goal, r.verdict, r.why)
			continue
		}
		floor, ratio := "—", formatNum(r.ratio)
		if r.den.name != "" {
			floor = formatNum(r.denV) + " " + r.den.unit
			ratio += "×"
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\n", name, formatNum(r.numV), r.num.unit, floor, ratio, goal, r.verdict)
	}
	return tw.Flush()
}

func opSymbol(op string) string {
	switch op {
	case "<=":
		return "≤"
	case ">=":
		return "≥"
	}
	return "="
}

// formatNum prints v with three significant digits, or as an integer when
// it is one.
func formatNum(v float64) string {
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return fmt.Sprint(v)
	case v == math.Trunc(v) && math.Abs(v) < 1e9:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// goal is the target of r as text, such as "≤ 3×", "reported" for a
// reported row, or "—" for info rows.
func (t target) goal() string {
	if t.op == "" && t.report {
		return "reported"
	}
	if t.op == "" {
		return "—"
	}
	g := opSymbol(t.op) + " " + formatNum(t.bound)
	if t.den.name != "" {
		g += "×"
	}
	return g
}

// targetsMarkdown is the markdown table of the targets with a bound and
// the reported rows, in definition order: what docs/HARNESS.md shows under
// "Where it stands".
func targetsMarkdown(ts []target) string {
	var b strings.Builder
	b.WriteString("| measure | ÷ floor | target |\n|---|---|--:|\n")
	for _, t := range ts {
		if t.op == "" && !t.report {
			continue
		}
		den := "—"
		if t.den.name != "" {
			den = "`" + t.den.name + "` " + t.den.unit
		}
		goal := t.goal()
		if t.note != "" {
			goal += " (" + t.note + ")"
		}
		fmt.Fprintf(&b, "| `%s` %s | %s | %s |\n", t.num.name, t.num.unit, den, goal)
	}
	return b.String()
}

// resultsMarkdown is the table of writeTable in markdown, for
// bench/out/ratios.md.
func resultsMarkdown(rows []row, s samples) string {
	runs := 0
	for _, units := range s {
		for _, vs := range units {
			runs = max(runs, len(vs))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Ratios against in-run floors\n\nMedians of up to %d runs, written by `go run ./bench/cmd/benchratio`.\n\n", runs)
	b.WriteString("| measure | median | floor | ratio | target | result |\n|---|--:|--:|--:|--:|---|\n")
	for _, r := range rows {
		name := "`" + r.num.name + "`"
		if r.den.name != "" {
			name += " ÷ `" + r.den.name + "`"
		}
		if r.verdict == verdictMissing {
			fmt.Fprintf(&b, "| %s | — | — | — | %s | %s: %s |\n", name, r.goal(), r.verdict, r.why)
			continue
		}
		floor, ratio := "—", formatNum(r.ratio)
		if r.den.name != "" {
			floor = formatNum(r.denV) + " " + r.den.unit
			ratio += "×"
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s | %s |\n", name, formatNum(r.numV), r.num.unit, floor, ratio, r.goal(), r.verdict)
	}
	return b.String()
}
