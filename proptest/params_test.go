package proptest

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leanovate/gopter"
)

// envInt reads a positive integer from the environment, or returns def.
func envInt(t testing.TB, name string, def int64) int64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return v
}

// params returns gopter parameters for a property with the given default
// number of successful cases and maximum size (operations per case),
// overridden by KVALLOC_PROP_SEED, KVALLOC_PROP_TESTS and KVALLOC_PROP_SIZE.
func params(t testing.TB, tests, size int) *gopter.TestParameters {
	p := gopter.DefaultTestParametersWithSeed(envInt(t, "KVALLOC_PROP_SEED", time.Now().UnixNano()))
	p.MinSuccessfulTests = int(envInt(t, "KVALLOC_PROP_TESTS", int64(tests)))
	p.MaxSize = int(envInt(t, "KVALLOC_PROP_SIZE", int64(size)))
	p.MaxShrinkCount = 200
	return p
}

// check runs one property and fails t with the report, the seed and the
// command that replays it.
func check(t *testing.T, prop gopter.Prop, p *gopter.TestParameters) {
	t.Helper()
	var out bytes.Buffer
	props := gopter.NewProperties(p)
	props.Property(t.Name(), prop)
	if !props.Run(gopter.NewFormatedReporter(true, 120, &out)) {
		t.Errorf("%s\nfailed with initial seed: %d\nreplay: KVALLOC_PROP_SEED=%d go test -run '^%s$' ./proptest/",
			out.String(), p.Seed(), p.Seed(), t.Name())
		return
	}
	t.Log(out.String())
}

// fails reports whether prop fails under a fixed seed: the proofs that a
// property bites use it.
func fails(prop gopter.Prop, seed int64, tests, size int) (bool, string) {
	p := gopter.DefaultTestParametersWithSeed(seed)
	p.MinSuccessfulTests, p.MaxSize, p.MaxShrinkCount = tests, size, 0
	r := prop.Check(p)
	var out bytes.Buffer
	gopter.NewFormatedReporter(true, 120, &out).ReportTestResult("broken", r)
	return !r.Passed(), out.String()
}
