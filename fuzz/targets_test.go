package fuzz

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// runTargets runs fuzz/targets.sh of the module at root.
func runTargets(t *testing.T, root string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", filepath.Join(root, "fuzz", "targets.sh"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// parsedTargets lists "DIR TARGET" for every func FuzzX(x *testing.F) of
// the module's _test.go files, as go/parser reads them.
func parsedTargets(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") || len(fn.Type.Params.List) != 1 {
				continue
			}
			star, ok := fn.Type.Params.List[0].Type.(*ast.StarExpr)
			if !ok {
				continue
			}
			if sel, ok := star.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "F" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testing" {
					found = append(found, filepath.ToSlash(rel)+" "+fn.Name.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(found, func(a, b string) int {
		return strings.Compare(strings.Fields(a)[1], strings.Fields(b)[1])
	})
	return found
}

// TestTargetsScript checks fuzz/targets.sh, the list the libFuzzer build
// (.clusterfuzzlite/build.sh) builds, against go/parser over the module.
func TestTargetsScript(t *testing.T) {
	out, err := runTargets(t, "..")
	if err != nil {
		t.Fatalf("targets.sh: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	want := parsedTargets(t, "..")
	if !slices.Equal(got, want) {
		t.Fatalf("targets.sh lists\n%s\ngo/parser finds\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Contains(got, "fuzz FuzzAllocator") {
		t.Fatalf("targets.sh does not list fuzz FuzzAllocator: %q", got)
	}
}

// TestTargetsScriptFindsNewPackages runs targets.sh over a module made up
// here: a target in a new package, with another parameter name, is listed;
// one name in two packages and a module without targets fail.
func TestTargetsScriptFindsNewPackages(t *testing.T) {
	root := t.TempDir()
	script, err := os.ReadFile("targets.sh")
	if err != nil {
		t.Fatal(err)
	}
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("fuzz/targets.sh", string(script))
	if out, err := runTargets(t, root); err == nil {
		t.Fatalf("targets.sh passed with no target: %s", out)
	}
	write("fuzz/a_test.go", "package fuzz\n\nimport \"testing\"\n\nfunc FuzzA(f *testing.F) {\n}\n\nfunc helper(f *testing.F) {\n}\n")
	write("daemon/frame/frame_test.go", "package frame\n\nimport \"testing\"\n\nfunc FuzzFrame(ff *testing.F) {\n}\n")
	write("fuzz/testdata/fuzz/x_test.go", "package x\n\nimport \"testing\"\n\nfunc FuzzIgnored(f *testing.F) {\n}\n")
	out, err := runTargets(t, root)
	if err != nil {
		t.Fatalf("targets.sh: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(out), "fuzz FuzzA\ndaemon/frame FuzzFrame"; got != want {
		t.Fatalf("targets.sh lists %q, want %q", got, want)
	}
	if want := parsedTargets(t, root); !slices.Equal(strings.Split(strings.TrimSpace(out), "\n"), want) {
		t.Fatalf("go/parser finds %q", want)
	}
	write("other/a_test.go", "package other\n\nimport \"testing\"\n\nfunc FuzzA(f *testing.F) {\n}\n")
	out, err = runTargets(t, root)
	if err == nil || !strings.Contains(out, "FuzzA is defined in more than one package: fuzz other") {
		t.Fatalf("targets.sh with FuzzA twice: %v\n%s", err, out)
	}
}

// compileAlone type-checks every target that targets.sh lists in the module
// at root as go-118-fuzz-build compiles it (.clusterfuzzlite/build.sh):
// the package's non-test files and the target's own file, none of the
// other _test.go files. It returns one error line per target that does not
// compile so. It uses the standard testing package, not the builder's
// (which has only F and T); make cflite-check builds with that one.
func compileAlone(t *testing.T, root string) []string {
	t.Helper()
	out, err := runTargets(t, root)
	if err != nil {
		t.Fatalf("targets.sh: %v\n%s", err, out)
	}
	var failed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		dir, target, _ := strings.Cut(line, " ")
		pkgDir := filepath.Join(root, dir)
		file := ""
		tests, _ := filepath.Glob(filepath.Join(pkgDir, "*_test.go"))
		for _, f := range tests {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "\nfunc "+target+"(") {
				file = filepath.Base(f)
			}
		}
		if file == "" {
			t.Fatalf("%s: no _test.go file in %s defines it", target, dir)
		}
		list := exec.Command("go", "list", "-f", `{{join .GoFiles "\n"}}`, ".")
		list.Dir = pkgDir
		names, err := list.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", dir, err)
		}
		args := append([]string{"vet"}, strings.Fields(string(names))...)
		vet := exec.Command("go", append(args, file)...)
		vet.Dir = pkgDir
		if out, err := vet.CombinedOutput(); err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s/%s) does not compile without the package's other _test.go files: %v\n%s", target, dir, file, err, out))
		}
	}
	return failed
}

// TestTargetsCompileAlone fails, naming the target, when a target's file
// uses a helper of another _test.go file, as FuzzFrameDecoder's and
// FuzzDaemonOwnership's did (seedSets): go test compiles it, the
// libFuzzer build does not. It is make test's quick check of that class;
// make cflite-check builds every target with the builder itself.
func TestTargetsCompileAlone(t *testing.T) {
	if failed := compileAlone(t, ".."); len(failed) > 0 {
		t.Fatal(strings.Join(failed, "\n"))
	}
}

// TestTargetsCompileAloneBites runs the check over a module made up here:
// a target whose file calls a helper of another _test.go file fails it by
// name, and one that calls a non-test file's passes.
func TestTargetsCompileAloneBites(t *testing.T) {
	root := t.TempDir()
	script, err := os.ReadFile("targets.sh")
	if err != nil {
		t.Fatal(err)
	}
	for path, text := range map[string]string{
		"go.mod":              "module example.com/m\n\ngo 1.22\n",
		"fuzz/targets.sh":     string(script),
		"fuzz/lib.go":         "package fuzz\n\nfunc libHelper(b []byte) int { return len(b) }\n",
		"fuzz/helper_test.go": "package fuzz\n\nfunc testHelper(b []byte) int { return len(b) }\n",
		"fuzz/good_test.go":   "package fuzz\n\nimport \"testing\"\n\nfunc FuzzGood(f *testing.F) {\n\tf.Fuzz(func(t *testing.T, b []byte) { _ = libHelper(b) })\n}\n",
		"fuzz/bad_test.go":    "package fuzz\n\nimport \"testing\"\n\nfunc FuzzBad(f *testing.F) {\n\tf.Fuzz(func(t *testing.T, b []byte) { _ = testHelper(b) })\n}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	failed := compileAlone(t, root)
	if len(failed) != 1 || !strings.HasPrefix(failed[0], "FuzzBad (fuzz/bad_test.go)") || !strings.Contains(failed[0], "undefined: testHelper") {
		t.Fatalf("the check found %q; want FuzzBad alone, undefined: testHelper", failed)
	}
}
