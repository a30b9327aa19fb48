package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample is benchmark output in the shape `make bench` writes: -v chatter,
// two rounds, custom units.
const sample = `goos: linux
goarch: amd64
pkg: github.com/kvalloc/kvalloc/bench
BenchmarkAllocate/region=heap
BenchmarkAllocate/region=heap-2         	 1000	 10.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkAllocate/region=cuda-host
    allocator_test.go:16: region=cuda-host unavailable: no CUDA
--- SKIP: BenchmarkAllocate/region=cuda-host
BenchmarkFloor/mutex-2                  	 1000	 4.0 ns/op
BenchmarkFloor/bump-2                   	 1000	 2.0 ns/op
BenchmarkAllocateBatch/region=heap/placement=scattered/n=5700-2 	 10	 60000 ns/op	 12.0 ns/block	 0 B/op	 0 allocs/op
BenchmarkFill/region=pinned-2           	 10	 1 ns/op	 20.0 GB/s
BenchmarkFloor/copy-2                   	 10	 1 ns/op	 21.0 GB/s
PASS
goos: linux
goarch: amd64
pkg: github.com/kvalloc/kvalloc/bench
BenchmarkAllocate/region=heap-2         	 1000	 14.0 ns/op	 0 B/op	 0 allocs/op
BenchmarkFloor/mutex-2                  	 1000	 4.0 ns/op
BenchmarkFloor/bump-2                   	 1000	 2.0 ns/op
BenchmarkAllocateBatch/region=heap/placement=scattered/n=5700-2 	 10	 60000 ns/op	 8.0 ns/block	 0 B/op	 0 allocs/op
BenchmarkFill/region=pinned-2           	 10	 1 ns/op	 18.0 GB/s
BenchmarkFloor/copy-2                   	 10	 1 ns/op	 21.0 GB/s
BenchmarkPrefixRecovery/strategy=onepass/n=5700-2 	 10	 100 ns/op	 0 probes/op	 4560 granted/op
BenchmarkAllocatorPool/object=16KiB/pool=45GiB/op=batch-warm-2 	 10	 34200 ns/op	 6.0 ns/block
BenchmarkAllocatorPool/object=8MiB/pool=45GiB/op=batch-warm-2 	 10	 45600 ns/op	 8.0 ns/block
BenchmarkAllocatorPool/object=8MiB/pool=45GiB/op=batch-fresh-2 	 10	 68400 ns/op	 12.0 ns/block
BenchmarkAllocatorPool/object=8MiB/pool=45GiB/op=free-2 	 10	 51300 ns/op	 9.0 ns/block
BenchmarkAllocatorPool/object=8MiB/pool=45GiB/op=new-2 	 10	 2000 ns/op
BenchmarkAllocatorPool/object=8MiB/pool=1TiB/op=new-2 	 10	 2100 ns/op
BenchmarkSegmentPin/pin=mlock/workers=1-2 	 1	 2000000000 ns/op	 2.0 GiB/s	 20000000 first-ns	 2000000000 full-ns
BenchmarkSegmentPin/pin=mlock/workers=2-2 	 1	 1000000000 ns/op	 3.0 GiB/s	 30000000 first-ns	 1300000000 full-ns
BenchmarkSegmentPin/pin=none/workers=1-2 	 1	 1000000000 ns/op	 4.0 GiB/s	 20000000 first-ns	 1000000000 full-ns
BenchmarkSegmentPin/pin=none/workers=2-2 	 1	 1000000000 ns/op	 6.0 GiB/s	 300000000 first-ns	 600000000 full-ns
PASS
`

func readSample(t *testing.T) samples {
	t.Helper()
	s := samples{}
	if err := s.read(strings.NewReader(sample), "sample"); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMedianAndNames(t *testing.T) {
	s := readSample(t)
	if v, n, ok := s.median("Allocate/region=heap", "ns/op"); !ok || n != 2 || v != 12 {
		t.Errorf("median of Allocate/region=heap = %v over %d (ok %v), want 12 over 2", v, n, ok)
	}
	if v, _, ok := s.median("AllocateBatch/region=heap/placement=scattered/n=5700", "ns/block"); !ok || v != 10 {
		t.Errorf("median ns/block = %v (ok %v), want 10", v, ok)
	}
	if _, _, ok := s.median("Allocate/region=cuda-host", "ns/op"); ok {
		t.Errorf("a skipped benchmark has results")
	}
}

func TestEvaluate(t *testing.T) {
	rows := evaluate(readSample(t), targets)
	// Medians: Allocate 12 ns against a 2 ns bump is 6×, within 20×;
	// 10 ns/block against a 2 ns bump is 5×, exactly on the bound, which
	// passes; Fill 19 GB/s against 21 is 0.905×.
	want := map[string]verdict{
		"Allocate/region=heap ns/op":                                    verdictPass,
		"AllocateBatch/region=heap/placement=scattered/n=5700 ns/block": verdictPass,
		"Fill/region=pinned GB/s":                                       verdictPass,
		"PrefixRecovery/strategy=onepass/n=5700 probes/op":              verdictPass,
		"PrefixRecovery/strategy=onepass/n=5700 granted/op":             verdictPass,
		"PrefixRecovery/strategy=binarysearch/n=5700 ns/op":             verdictMissing,
		"Allocate/region=cuda-host ns/op":                               verdictMissing,
		"Allocate/region=heap allocs/op":                                verdictPass,
		// 8 ns/block over a 2 ns bump: 4×; fresh 12 is 6× and 1.5× warm;
		// free 9 is 4.5×; 8 MiB over 16 KiB is 1.33×; New at 1 TiB
		// over New at 45 GiB is 1.05×.
		"AllocatorPool/object=8MiB/pool=45GiB/op=batch-warm ns/block": verdictPass,
		"AllocatorPool/object=8MiB/pool=45GiB/op=free ns/block":       verdictPass,
		"AllocatorPool/object=8MiB/pool=1TiB/op=new ns/op":            verdictPass,
		// 30 ms to the first block of a 1.3 s pin is 0.023×; 3.0 GiB/s with
		// two workers against 2.0 with one is 1.5×, short of 1.6.
		"SegmentPin/pin=mlock/workers=2 first-ns": verdictPass,
		"SegmentPin/pin=mlock/workers=2 GiB/s":    verdictMiss,
		// Informative rows: no verdict, even at a poor 0.5×.
		"SegmentPin/pin=none/workers=2 first-ns": verdictInfo,
		"SegmentPin/pin=cuda/workers=2 first-ns": verdictMissing,
	}
	got := map[string]row{}
	for _, r := range rows {
		if _, seen := got[r.num.String()]; !seen {
			got[r.num.String()] = r
		}
	}
	for k, v := range want {
		r, ok := got[k]
		if !ok {
			t.Errorf("no row for %s", k)
			continue
		}
		if r.verdict != v {
			t.Errorf("%s: verdict %s (ratio %v), want %s", k, r.verdict, r.ratio, v)
		}
	}
}

func TestMissAndStrict(t *testing.T) {
	dir := t.TempDir()
	// Allocate 140 and 100 ns: 60× the 2 ns bump, past its 20× bound.
	slow := strings.ReplaceAll(sample, "14.0 ns/op", "140.0 ns/op")
	slow = strings.ReplaceAll(slow, "10.0 ns/op", "100.0 ns/op")
	path := filepath.Join(dir, "bench.txt")
	if err := os.WriteFile(path, []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d without -strict, want 0; stderr %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "MISS") {
		t.Errorf("no MISS in\n%s", out.String())
	}
	if !strings.Contains(out.String(), "n/a: no Allocate/region=cuda-host") {
		t.Errorf("skipped benchmark not reported in\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-strict", path}, &out, &errOut); code != 1 {
		t.Errorf("exit %d with -strict and a MISS, want 1", code)
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 2 {
		t.Errorf("no arguments: exit %d, want 2", code)
	}
	if code := run([]string{filepath.Join(t.TempDir(), "missing.txt")}, &out, &errOut); code != 2 {
		t.Errorf("missing file: exit %d, want 2", code)
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	os.WriteFile(empty, []byte("PASS\n"), 0o644)
	if code := run([]string{empty}, &out, &errOut); code != 2 {
		t.Errorf("file without results: exit %d, want 2", code)
	}
}

// TestEvictionRows checks the eviction and prefix rows at production
// size: scattered victims within 2× of adjacent ones, unevictable objects
// at the cold end within 1.5× of none, onepass's prefix within 1.2× of a
// fitting reservation, the allocator time of the search ≥ 10×.
func TestEvictionRows(t *testing.T) {
	const in = `BenchmarkEvictOnDemand/victims=adjacent-2 	 3	 1000000 ns/op
BenchmarkEvictOnDemand/victims=scattered-2 	 3	 1900000 ns/op
BenchmarkEvictPastLocked/cold=none-2 	 100	 20000 ns/op
BenchmarkEvictPastLocked/cold=temporary-2 	 100	 21000 ns/op
BenchmarkEvictPastLocked/cold=read-locked-2 	 100	 40000 ns/op
BenchmarkPrefixRecovery/strategy=onepass/n=5700-2 	 10	 500000 ns/op	 50000 alloc-ns/op
BenchmarkPrefixRecovery/strategy=binarysearch/n=5700-2 	 10	 1300000 ns/op	 700000 alloc-ns/op
BenchmarkPrefixRecovery/fit/n=4560-2 	 10	 400000 ns/op
`
	s := samples{}
	if err := s.read(strings.NewReader(in), "in"); err != nil {
		t.Fatal(err)
	}
	want := map[string]verdict{
		"EvictOnDemand/victims=scattered ns/op":                   verdictPass,
		"EvictPastLocked/cold=temporary ns/op":                    verdictPass,
		"EvictPastLocked/cold=read-locked ns/op":                  verdictMiss,
		"PrefixRecovery/strategy=onepass/n=5700 ns/op":            verdictMiss, // 1.25×
		"PrefixRecovery/strategy=binarysearch/n=5700 alloc-ns/op": verdictPass,
		"PrefixRecovery/strategy=binarysearch/n=5700 ns/op":       verdictInfo,
	}
	got := map[string]verdict{}
	for _, r := range evaluate(s, targets) {
		if _, seen := got[r.num.String()]; !seen {
			got[r.num.String()] = r.verdict
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
}

// TestPoolTargets checks the production-size rows (8 MiB objects in a
// 45 GiB pool) one by one:
// each ratio, its verdict, and that the fresh ÷ warm row divides the two
// pool benchmarks, not a floor.
func TestPoolTargets(t *testing.T) {
	rows := evaluate(readSample(t), targets)
	type key struct{ num, den string }
	want := map[key]struct {
		ratio float64
		v     verdict
	}{
		{"AllocatorPool/object=8MiB/pool=45GiB/op=batch-warm ns/block", "Floor/bump ns/op"}:                                             {4, verdictPass},
		{"AllocatorPool/object=8MiB/pool=45GiB/op=batch-fresh ns/block", "Floor/bump ns/op"}:                                            {6, verdictPass},
		{"AllocatorPool/object=8MiB/pool=45GiB/op=batch-fresh ns/block", "AllocatorPool/object=8MiB/pool=45GiB/op=batch-warm ns/block"}: {1.5, verdictPass},
		{"AllocatorPool/object=8MiB/pool=45GiB/op=free ns/block", "Floor/bump ns/op"}:                                                   {4.5, verdictPass},
		{"AllocatorPool/object=8MiB/pool=45GiB/op=batch-warm ns/block", "AllocatorPool/object=16KiB/pool=45GiB/op=batch-warm ns/block"}: {8.0 / 6, verdictPass},
		{"AllocatorPool/object=8MiB/pool=1TiB/op=new ns/op", "AllocatorPool/object=8MiB/pool=45GiB/op=new ns/op"}:                       {1.05, verdictPass},
		{"Allocate/region=heap ns/op", "Floor/bump ns/op"}:                                                                              {6, verdictPass},
		{"Allocate/region=heap ns/op", "Floor/mutex ns/op"}:                                                                             {3, verdictInfo},
	}
	for _, r := range rows {
		k := key{r.num.String(), r.den.String()}
		w, ok := want[k]
		if !ok {
			continue
		}
		delete(want, k)
		if math.Abs(r.ratio-w.ratio) > 1e-9 || r.verdict != w.v {
			t.Errorf("%s ÷ %s: ratio %v %s, want %v %s", k.num, k.den, r.ratio, r.verdict, w.ratio, w.v)
		}
	}
	for k := range want {
		t.Errorf("no row %s ÷ %s", k.num, k.den)
	}
}

// docs/HARNESS.md's target table is the output of benchratio -targets, between
// these markers.
const (
	readmePath         = "../../../docs/HARNESS.md"
	readmeTargetsOpen  = "<!-- benchratio -targets: begin (generated; KVALLOC_UPDATE_README=1 go test ./bench/cmd/benchratio rewrites it) -->\n"
	readmeTargetsClose = "<!-- benchratio -targets: end -->\n"
)

// TestReadmeTargets fails when docs/HARNESS.md's target table differs from the
// targets defined here, so a target added, changed or dropped in benchratio
// cannot leave the document behind. KVALLOC_UPDATE_README=1 rewrites the
// document's block instead.
func TestReadmeTargets(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(readme), readmeTargetsOpen)
	if !ok {
		t.Fatalf("docs/HARNESS.md lacks the line %q", readmeTargetsOpen)
	}
	block, after, ok := strings.Cut(rest, readmeTargetsClose)
	if !ok {
		t.Fatalf("docs/HARNESS.md lacks the line %q", readmeTargetsClose)
	}
	want := targetsMarkdown(targets)
	if block == want {
		return
	}
	if os.Getenv("KVALLOC_UPDATE_README") != "" {
		if err := os.WriteFile(readmePath, []byte(before+readmeTargetsOpen+want+readmeTargetsClose+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the target table in %s", readmePath)
		return
	}
	t.Errorf("docs/HARNESS.md's target table differs from benchratio's targets; run\n\tKVALLOC_UPDATE_README=1 go test -run TestReadmeTargets ./bench/cmd/benchratio\ndocs/HARNESS.md has:\n%s\nbenchratio -targets prints:\n%s", block, want)
}

func TestTargetsFlagAndMarkdown(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-targets"}, &out, &errOut); code != 0 {
		t.Fatalf("-targets: exit %d: %s", code, errOut.String())
	}
	if out.String() != targetsMarkdown(targets) {
		t.Errorf("-targets printed\n%s", out.String())
	}
	if !strings.Contains(out.String(), "| `Allocate/region=heap` ns/op | `Floor/bump` ns/op | ≤ 20× |") {
		t.Errorf("-targets lacks the Allocate row:\n%s", out.String())
	}
	if strings.Contains(out.String(), "L1CycleParallel") {
		t.Errorf("-targets lists an info row:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "| `Contention/op=lookup/procs=2` ops/s | `Contention/op=lookup/procs=1` ops/s | reported (ReserveReadPrefix + FinishRead) |") {
		t.Errorf("-targets lacks the reported lookup row:\n%s", out.String())
	}
	if code := run([]string{"-targets", "x.txt"}, &out, &errOut); code != 2 {
		t.Errorf("-targets with input: exit %d, want 2", code)
	}

	dir := t.TempDir()
	in, md := filepath.Join(dir, "bench.txt"), filepath.Join(dir, "ratios.md")
	if err := os.WriteFile(in, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"-md", md, in}, &out, &errOut); code != 0 {
		t.Fatalf("-md: exit %d: %s", code, errOut.String())
	}
	got, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `Allocate/region=heap` ÷ `Floor/bump` | 12 ns/op | 2 ns/op | 6× | ≤ 20× | PASS |", "n/a: no Allocate/region=cuda-host"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("ratios.md lacks %q:\n%s", want, got)
		}
	}
}

// TestReportedRows: a reported row computes its ratio, neither passes nor
// misses (so -strict ignores it), and says "reported".
func TestReportedRows(t *testing.T) {
	in := "BenchmarkContention/op=store/procs=1-2 \t 100 \t 1000 ns/op \t 1000000 ops/s\n" +
		"BenchmarkContention/op=store/procs=2-2 \t 100 \t 800 ns/op \t 1250000 ops/s\n"
	s := samples{}
	if err := s.read(strings.NewReader(in), "in"); err != nil {
		t.Fatal(err)
	}
	var r row
	for _, x := range evaluate(s, targets) {
		if x.num.name == "Contention/op=store/procs=2" {
			r = x
		}
	}
	if r.verdict != verdictInfo || r.ratio != 1.25 {
		t.Fatalf("store row: verdict %s, ratio %v; want info, 1.25", r.verdict, r.ratio)
	}
	var out bytes.Buffer
	if err := writeTable(&out, []row{r}, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "1.25×  reported  info") {
		t.Errorf("table row:\n%s", out.String())
	}
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	if code := run([]string{"-strict", path}, &out, &errOut); code != 0 {
		t.Errorf("-strict with only reported rows present: exit %d", code)
	}
}
