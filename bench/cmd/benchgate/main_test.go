package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bench is a synthetic benchmark: true ns/op, relative half-width of
// uniform noise, B/op and allocs/op.
type bench struct {
	name          string
	ns, noise     float64
	bytes, allocs int
}

// goTestOutput renders runs rounds of benches as go test -benchmem
// prints them, with deterministic noise drawn from seed.
func goTestOutput(seed uint64, runs int, benches ...bench) string {
	rng := rand.New(rand.NewPCG(seed, 42))
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: example.com/x/bench\ncpu: Synthetic CPU @ 3.00GHz\n")
	for range runs {
		for _, bn := range benches {
			ns := bn.ns * (1 + bn.noise*(2*rng.Float64()-1))
			fmt.Fprintf(&b, "Benchmark%s \t    1000\t%10.1f ns/op\t%8d B/op\t%8d allocs/op\n", bn.name, ns, bn.bytes, bn.allocs)
		}
	}
	b.WriteString("PASS\nok  \texample.com/x/bench\t1.234s\n")
	return b.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestFileModeRegression(t *testing.T) {
	old := writeFile(t, "old.txt", goTestOutput(1, 10,
		bench{name: "Alloc/size=64", ns: 1000, noise: 0.01, bytes: 64, allocs: 1},
		bench{name: "Free", ns: 300, noise: 0.01}))
	cur := writeFile(t, "new.txt", goTestOutput(2, 10,
		bench{name: "Alloc/size=64", ns: 1120, noise: 0.01, bytes: 64, allocs: 1},
		bench{name: "Free", ns: 300, noise: 0.01}))
	code, out, errOut := runArgs("-old", old, "-new", cur)
	t.Log("\n" + out)
	assert.Equal(t, exitRegression, code, errOut)
	assert.Regexp(t, `(?m)^sec/op\s+old\.txt\s+new\.txt\s+delta$`, out)
	assert.Regexp(t, `(?m)^Alloc/size=64\s+\S+ ± 1%\s+1\.1\d\dµ ± 1%\s+\+1[12]\.\d\d% \(p=0\.000 n=10\)\s+REGRESSION`, out)
	assert.Regexp(t, `(?m)^Free\s.*~ \(p=\d\.\d+ n=10\)$`, out)
	assert.Contains(t, out, "benchgate: FAIL: 1 regression(s):\n  Alloc/size=64 sec/op: +1")
	assert.NotContains(t, out, "NaN")

	// A 25% threshold lets +12% through; so does a disabled gate.
	code, _, _ = runArgs("-time-threshold", "0.25", "-old", old, "-new", cur)
	assert.Equal(t, exitOK, code)
	code, _, _ = runArgs("-time-threshold=-1", "-old", old, "-new", cur)
	assert.Equal(t, exitOK, code)
}

func TestFileModeSameDistribution(t *testing.T) {
	benches := []bench{
		{name: "Alloc/size=64", ns: 1000, noise: 0.01, bytes: 64, allocs: 1},
		{name: "Alloc/size=4096", ns: 5000, noise: 0.01, bytes: 4096, allocs: 1},
		{name: "Free", ns: 300, noise: 0.01},
	}
	for seed := uint64(1); seed <= 10; seed++ {
		old := writeFile(t, "old.txt", goTestOutput(seed, 10, benches...))
		cur := writeFile(t, "new.txt", goTestOutput(seed+100, 10, benches...))
		code, out, errOut := runArgs("-old", old, "-new", cur)
		assert.Equal(t, exitOK, code, "seed %d\n%s%s", seed, out, errOut)
		assert.Contains(t, out, "benchgate: PASS: no regressions")
	}
}

func TestFileModeAllocsZeroToOne(t *testing.T) {
	old := writeFile(t, "old.txt", goTestOutput(3, 10, bench{name: "Get", ns: 100, noise: 0.01}))
	cur := writeFile(t, "new.txt", goTestOutput(4, 10, bench{name: "Get", ns: 100, noise: 0.01, bytes: 8, allocs: 1}))
	code, out, _ := runArgs("-bytes-threshold=-1", "-old", old, "-new", cur)
	assert.Equal(t, exitRegression, code)
	assert.Contains(t, out, "Get allocs/op: median 0 -> 1, +1 >= 1 (")
	assert.NotContains(t, out, "Get B/op:", "B/op gate disabled")
	assert.NotContains(t, out, "NaN")
}

func TestFileModeAllZeroBytes(t *testing.T) {
	old := writeFile(t, "old.txt", goTestOutput(5, 10, bench{name: "Put", ns: 100, noise: 0.01}))
	cur := writeFile(t, "new.txt", goTestOutput(6, 10, bench{name: "Put", ns: 100, noise: 0.01}))
	code, out, _ := runArgs("-old", old, "-new", cur)
	assert.Equal(t, exitOK, code)
	assert.NotContains(t, out, "NaN")
	assert.NotContains(t, out, "all samples are equal")
	assert.Regexp(t, `(?m)^B/op\s+old\.txt\s+new\.txt\s+delta\nPut\s+0\.000 ± 0%\s+0\.000 ± 0%\s+~ \(p=1\.000 n=10\)$`, out)
}

func TestFileModeEmptySides(t *testing.T) {
	results := writeFile(t, "new.txt", goTestOutput(7, 10, bench{name: "Put", ns: 100}))
	empty := writeFile(t, "empty.txt", "PASS\n")

	code, out, _ := runArgs("-old", empty, "-new", results)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "benchgate: skipping:")

	code, _, errOut := runArgs("-strict-base", "-old", empty, "-new", results)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "-strict-base")

	code, _, errOut = runArgs("-old", results, "-new", empty)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "has no benchmark results")
}

func TestUsageErrors(t *testing.T) {
	f := writeFile(t, "f.txt", goTestOutput(8, 2, bench{name: "X", ns: 1}))
	missing := filepath.Join(t.TempDir(), "missing.txt")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{nil, "need -old and -new, or -base"},
		{[]string{"-old", f}, "file mode needs both -old and -new"},
		{[]string{"-new", f}, "file mode needs both -old and -new"},
		{[]string{"-old", f, "-new", f, "-base", "HEAD"}, "mutually exclusive"},
		{[]string{"-base", ""}, "-base is empty"},
		{[]string{"-old", f, "-new", f, "-count", "5"}, "-count is only valid with -base"},
		{[]string{"-old", f, "-new", f, "-confirm", "1"}, "-confirm is only valid with -base"},
		{[]string{"-old", f, "-new", f, "extra"}, "unexpected arguments"},
		{[]string{"-old", f, "-new", f, "-alpha", "0"}, "alpha 0 is not in (0, 1)"},
		{[]string{"-old", f, "-new", f, "-alpha", "x"}, "invalid value"},
		{[]string{"-old", f, "-new", f, "-confidence", "2"}, "confidence"},
		{[]string{"-bogus"}, "flag provided but not defined"},
		{[]string{"-base", "HEAD", "-count", "0"}, "-count must be at least 1"},
		{[]string{"-base", "HEAD", "-confirm", "-1"}, "-confirm must not be negative"},
		{[]string{"-base", "HEAD", "-bench", "("}, "bad -bench"},
		{[]string{"-base", "HEAD", "-benchtime", ""}, "bad -benchtime"},
		{[]string{"-base", "HEAD", "-profile-time", "0s"}, "-profile-time must be positive"},
		{[]string{"-old", missing, "-new", f}, "no such file"},
		{[]string{"-old", f, "-new", missing}, "no such file"},
	} {
		code, out, errOut := runArgs(c.args...)
		assert.Equal(t, exitError, code, "%q", c.args)
		assert.Contains(t, errOut, c.msg, "%q", c.args)
		assert.Empty(t, out, "%q", c.args)
	}

	code, _, errOut := runArgs("-h")
	assert.Equal(t, exitOK, code)
	for _, flag := range []string{"-alpha", "-time-threshold", "-bytes-threshold", "-allocs-delta", "-strict-base", "-old", "-new", "-base", "-bench", "-count", "-benchtime", "-pkg", "-confirm", "-profile", "-profile-time", "-out"} {
		assert.Regexp(t, `(?m)^  `+flag+`( \S+)?$`, errOut)
	}
	assert.Contains(t, errOut, "Exit status: 0 no regression or skipped, 1 regression, 2 usage error or failure.")
}

// TestFileModeTwoRunsOfSameCode feeds the gate two real runs of the same
// kvalloc benchmark binary (bench-ci's gated set, 10 interleaved rounds at
// -cpu 1, recorded in testdata/ on a 2-core VM) and expects no regression
// at the default thresholds. It then slows every sec/op of the second run
// by 12 % and expects the gate to fail on each benchmark that has noise
// low enough to see it.
func TestFileModeTwoRunsOfSameCode(t *testing.T) {
	a, b := filepath.Join("testdata", "same-code-1.txt"), filepath.Join("testdata", "same-code-2.txt")
	code, out, errOut := runArgs("-old", a, "-new", b)
	t.Log("\n" + out)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "PASS: no regressions")
	assert.NotContains(t, out, "NaN")

	raw, err := os.ReadFile(b)
	require.NoError(t, err)
	var slow strings.Builder
	for _, line := range strings.SplitAfter(string(raw), "\n") {
		f := strings.Fields(line)
		for i := 1; i+1 < len(f); i++ {
			if f[i+1] == "ns/op" {
				var ns float64
				_, err := fmt.Sscan(f[i], &ns)
				require.NoError(t, err, line)
				line = strings.Replace(line, f[i]+" ns/op", fmt.Sprintf("%.2f ns/op", ns*1.12), 1)
			}
		}
		slow.WriteString(line)
	}
	code, out, _ = runArgs("-old", a, "-new", writeFile(t, "slow.txt", slow.String()))
	t.Log("\n" + out)
	assert.Equal(t, exitRegression, code)
	assert.Regexp(t, `(?m)^AllocateBatch/region=heap/placement=scattered/n=256\s.*\+1[0-4]\.\d\d% .*REGRESSION`, out)
}
