//go:build linux

package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/wire"
)

// TestVersionFlag: -version prints the module, its version, the toolchain
// and the protocol version on stdout, exits 0 and starts nothing.
func TestVersionFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	stdout = &out
	defer func() { stdout = os.Stdout }()
	if code := run(context.Background(), []string{"-version", "-socket", "/nonexistent/k.sock"}, &errOut, nil); code != 0 {
		t.Fatalf("-version: exit %d, %s", code, errOut.String())
	}
	for _, want := range []string{"kvallocd ", "module   github.com/kvalloc/kvalloc ", "go       go1.",
		fmt.Sprintf("protocol %d to %d ", wire.Version, wire.MaxVersion)} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-version lacks %q:\n%s", want, out.String())
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("-version wrote to stderr: %q", errOut.String())
	}
}

// TestFormatVersion: a checkout's build shows its revision, time and
// whether it was modified; a build without VCS stamps, or without build
// information at all, still names the module and the protocol.
func TestFormatVersion(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kvalloc/kvalloc", Version: "v0.0.0-20261201120000-0123456789ab+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-12-01T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := formatVersion(info, true)
	for _, want := range []string{"kvallocd v0.0.0-20261201120000-0123456789ab+dirty\n",
		"vcs      git 0123456789abcdef 2026-12-01T12:00:00Z (modified)\n", fmt.Sprintf("protocol %d to %d ", wire.Version, wire.MaxVersion)} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	info = &debug.BuildInfo{Main: debug.Module{Path: "github.com/kvalloc/kvalloc", Version: "v1.2.3", Sum: "h1:abc="}}
	if got := formatVersion(info, true); !strings.Contains(got, "module   github.com/kvalloc/kvalloc v1.2.3 h1:abc=\n") || strings.Contains(got, "vcs") {
		t.Errorf("a released build:\n%s", got)
	}
	if got := formatVersion(nil, false); !strings.Contains(got, "no build information") || !strings.Contains(got, "protocol ") {
		t.Errorf("no build information:\n%s", got)
	}
}

// TestGoInstall: go install github.com/kvalloc/kvalloc/cmd/kvallocd@latest
// works, and the binary's -version names the version installed. The
// module, as a clone's tracked and untracked unignored files, is served at
// v0.1.0 from a file:// GOPROXY; the dependencies come from the module
// cache's download directory (a proxy in layout) or the usual proxy, into a
// fresh module cache, so the test neither leaves a fake version in the
// user's cache nor needs a network when the cache is warm. It fails on
// anything go install refuses: a replace or exclude directive in go.mod, a
// file a module zip may not hold, a package outside the module.
func TestGoInstall(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go install needs the go command on PATH: %v", err)
	}
	root := moduleRoot(t)
	const mod, ver = "github.com/kvalloc/kvalloc", "v0.1.0"
	tmp := t.TempDir()
	proxy := filepath.Join(tmp, "proxy")
	at := filepath.Join(proxy, mod, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(at, "list"), ver+"\n")
	writeFile(t, filepath.Join(at, ver+".info"), `{"Version":"`+ver+`","Time":"2026-01-01T00:00:00Z"}`)
	writeFile(t, filepath.Join(at, ver+".mod"), string(gomod))
	writeModuleZip(t, root, filepath.Join(at, ver+".zip"), mod+"@"+ver)

	env := func(name string) string {
		out, err := exec.Command(goBin, "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	proxies := "file://" + proxy + ",file://" + filepath.Join(env("GOMODCACHE"), "cache", "download")
	if p := env("GOPROXY"); p != "" && p != "off" {
		proxies += "," + p
	}
	gobin := filepath.Join(tmp, "bin")
	cmd := exec.Command(goBin, "install", mod+"/cmd/kvallocd@latest")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOPROXY="+proxies, "GOBIN="+gobin, "GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOFLAGS=-modcacherw", "GOSUMDB=off", "GOPRIVATE=", "GONOPROXY=", "GONOSUMDB=", "GOWORK=off", "GO111MODULE=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/kvallocd@latest: %v\n%s", mod, err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "kvallocd"), "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("kvallocd -version: %v\n%s", err, out)
	}
	for _, want := range []string{"kvallocd " + ver + "\n", "module   " + mod + " " + ver + " h1:", fmt.Sprintf("protocol %d to %d ", wire.Version, wire.MaxVersion)} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the installed kvallocd's -version lacks %q:\n%s", want, out)
		}
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" || strings.TrimSpace(string(out)) == os.DevNull {
		t.Fatalf("go env GOMOD: %v %q", err, out)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// writeModuleZip writes root's files that git tracks, or would track, as
// a module zip whose entries begin with prefix.
func writeModuleZip(t *testing.T, root, path, prefix string) {
	git := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	git.Dir = root
	list, err := git.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s (the test packs the module's files as git sees them): %v", root, err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(list))
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.IndexByte(data, 0); i >= 0 {
			return i + 1, data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	})
	for sc.Scan() {
		name := sc.Text()
		if seen[name] {
			continue
		}
		seen[name] = true
		data, err := os.ReadFile(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		w, err := z.Create(prefix + "/" + filepath.ToSlash(name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
