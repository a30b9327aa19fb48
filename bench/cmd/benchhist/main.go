// Benchhist appends a benchmark run to the benchmark history, keyed by
// commit.
//
// Usage:
//
//	benchhist [-dir bench/history] [-commit SHA [-dirty]] bench.txt
//
// It reads bench.txt (Go benchmark format, as make bench writes it) and
// appends it to DIR/COMMIT.txt after the configuration lines
//
//	commit: <full hash of HEAD>
//	date: <now, RFC 3339, UTC>
//	dirty: <true when the tree has uncommitted changes to tracked files>
//
// so every result carries its commit and run (see package
// github.com/kvalloc/kvalloc/bench/internal/history). make bench runs it
// after every suite; the directory is untracked, and CI keeps it as an
// artifact. To see each target's ratio over the runs:
//
//	go run ./bench/cmd/benchratio -history bench/history -plot bench/out/history
//
// The flags are:
//
//	-dir DIR
//		The history directory (default "bench/history"; make bench
//		passes BENCH_HISTORY).
//	-commit SHA
//		The commit to file the run under (default: git rev-parse
//		HEAD, and the dirty flag from git status; outside git,
//		"unknown"). make bench records HEAD when it builds the
//		benchmarks and passes it, so a commit made during the run
//		does not take the results.
//	-dirty
//		With -commit: the tree had uncommitted changes to tracked
//		files.
//
// Benchhist exits 0 on success, 1 when bench.txt has no results or the
// history cannot be written, and 2 on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/bench/internal/history"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, time.Now))
}

func run(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	fs := flag.NewFlagSet("benchhist", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "bench/history", "the history `DIR`")
	commit := fs.String("commit", "", "file the run under `SHA` (default: git HEAD)")
	dirty := fs.Bool("dirty", false, "with -commit: the tree had uncommitted changes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: benchhist [-dir bench/history] [-commit SHA [-dirty]] bench.txt\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "benchhist: want one results file, got %d arguments\n", fs.NArg())
		fs.Usage()
		return 2
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "benchhist: %v\n", err)
		return 1
	}
	m := history.Meta{Commit: *commit, Dirty: *dirty, Date: now().UTC().Truncate(time.Second)}
	if m.Commit == "" {
		m.Commit, m.Dirty = gitState()
	}
	path, err := history.Append(*dir, m, data)
	if err != nil {
		fmt.Fprintf(stderr, "benchhist: %s: %v\n", fs.Arg(0), err)
		return 1
	}
	fmt.Fprintf(stdout, "benchhist: appended %s to %s\n", fs.Arg(0), path)
	return 0
}

// gitState returns HEAD and whether tracked files differ from it, or
// "unknown" outside a git checkout.
func gitState() (string, bool) {
	ctx := context.Background()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "HEAD").Output()
	if err != nil {
		return "unknown", false
	}
	status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), err == nil && len(strings.TrimSpace(string(status))) > 0
}
