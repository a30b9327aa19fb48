// Package history keeps benchmark results over commits, so that a slow
// drift that no pairwise gate sees shows up.
//
// A history is a directory of files in the Go benchmark format, one file
// per commit (COMMIT.txt). Each `make bench` appends one block to its
// commit's file: the configuration lines
//
//	commit: 0123abcd...
//	date: 2026-11-30T21:40:00Z
//	dirty: false
//
// then the results as go test printed them. benchfmt carries configuration
// lines over to every result that follows, so each result knows its commit
// and run; a block is a run. The files are plain text that benchstat reads
// too (benchstat -col commit bench/history/*.txt), and concatenating or
// copying them merges histories, which is what CI does with the directory
// kept as an artifact.
//
// Read groups the results back into runs and orders them by date; Plot
// draws named series over the runs with gonum/plot.
package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"
)

// The configuration keys of a run.
const (
	KeyCommit = "commit"
	KeyDate   = "date"
	KeyDirty  = "dirty"
)

// ErrNoResults reports an Append of output without a benchmark result.
var ErrNoResults = errors.New("history: no benchmark results")

// Meta identifies a run.
type Meta struct {
	// Commit is the full hash of the commit measured, or "unknown"
	// outside a git checkout.
	Commit string

	// Date is when the run was appended, in UTC, to the second.
	Date time.Time

	// Dirty reports that the working tree had uncommitted changes: the
	// results are of the commit plus those changes.
	Dirty bool
}

var commitRE = regexp.MustCompile(`^[0-9A-Za-z._-]+$`)

// Append appends one run, meta and the results in the Go benchmark
// format, to dir/COMMIT.txt, creating dir if needed, and returns the
// file's path. It refuses results without a benchmark line, and a
// commit that is not a plain name.
func Append(dir string, m Meta, results []byte) (string, error) {
	if !commitRE.MatchString(m.Commit) {
		return "", fmt.Errorf("history: bad commit %q", m.Commit)
	}
	if n := countResults(results); n == 0 {
		return "", ErrNoResults
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s: %s\n%s: %s\n%s: %t\n", KeyCommit, m.Commit, KeyDate, m.Date.UTC().Format(time.RFC3339), KeyDirty, m.Dirty)
	b.Write(results)
	if len(results) > 0 && results[len(results)-1] != '\n' {
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, m.Commit+".txt")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

func countResults(data []byte) int {
	n := 0
	r := benchfmt.NewReader(bytes.NewReader(data), "")
	for r.Scan() {
		if _, ok := r.Result().(*benchfmt.Result); ok {
			n++
		}
	}
	return n
}

// A Run is one appended block: its meta and its results.
type Run struct {
	Meta

	// Results are the results of the run, in file order.
	Results []*benchfmt.Result
}

// Short returns the first 8 characters of the commit, with "+" when the
// tree was dirty.
func (r *Run) Short() string {
	s := r.Commit
	if len(s) > 8 {
		s = s[:8]
	}
	if r.Dirty {
		s += "+"
	}
	return s
}

// Read reads every *.txt file in dir and returns its runs ordered by
// date, then commit. Results without a commit or date configuration are
// an error: they were not written by Append.
func Read(dir string) ([]*Run, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	type key struct{ commit, date, dirty string }
	runs := make(map[key]*Run)
	var order []*Run
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		r := benchfmt.NewReader(f, path)
		for r.Scan() {
			res, ok := r.Result().(*benchfmt.Result)
			if !ok {
				continue
			}
			k := key{string(res.GetConfig(KeyCommit)), string(res.GetConfig(KeyDate)), string(res.GetConfig(KeyDirty))}
			if k.commit == "" || k.date == "" {
				f.Close()
				return nil, fmt.Errorf("history: %s: result %s has no %s or %s line", path, res.Name, KeyCommit, KeyDate)
			}
			run := runs[k]
			if run == nil {
				date, err := time.Parse(time.RFC3339, k.date)
				if err != nil {
					f.Close()
					return nil, fmt.Errorf("history: %s: %v", path, err)
				}
				dirty, _ := strconv.ParseBool(k.dirty)
				run = &Run{Meta: Meta{Commit: k.commit, Date: date, Dirty: dirty}}
				runs[k] = run
				order = append(order, run)
			}
			run.Results = append(run.Results, res.Clone())
		}
		err = r.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(order, func(a, b *Run) int {
		if c := a.Date.Compare(b.Date); c != 0 {
			return c
		}
		return strings.Compare(a.Commit, b.Commit)
	})
	return order, nil
}
