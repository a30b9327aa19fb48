package mutant_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsFlowDownward: no package under internal/reference, tests
// included, depends on the benchmarks (bench/...): the models and the
// mutants sit below what they check, and a benchmark's broken variants sit
// in its own tests.
func TestImportsFlowDownward(t *testing.T) {
	const mod = "github.com/kvalloc/kvalloc"
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", mod+"/internal/reference/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps -test ./internal/reference/...: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == mod+"/bench" || strings.HasPrefix(p, mod+"/bench/") {
			t.Errorf("internal/reference depends on %s", p)
		}
	}
}
