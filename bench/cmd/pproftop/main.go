// Pproftop prints the functions that dominate a pprof profile.
//
// Usage:
//
//	pproftop [-n 10] [-sample_index NAME] [-focus REGEXP] [-tables flat,cum] profile.out
//
// It reads a CPU, heap or allocs profile (gzipped or not) and prints two
// tables of the top N functions, the first ranked by flat value, the
// second by cumulative value, with the columns of "pprof -top": flat,
// flat%, sum%, cum, cum%. Percentages are of the profile's total for
// the chosen value.
//
// Flat is charged to the leaf frame, the innermost inlined function of
// a sample's first location; cum is charged once per sample to every
// function on the stack, inlined ones included. Functions are
// identified by name, as with pprof's default granularity, and printed
// short: without the github.com/kvalloc/kvalloc/ prefix and with the type
// arguments of generic code as "[…]" (proftop.ShortName).
//
// The flags are:
//
//	-n N
//		Print the top N functions of each table (default 10).
//	-sample_index NAME
//		Rank by the sample value NAME ("cpu", "samples",
//		"alloc_space", "alloc_objects", "inuse_space",
//		"inuse_objects") or by its index. The default is the
//		profile's default sample type, or else its last one:
//		"cpu" for CPU profiles, "alloc_space" for the profile
//		written by go test -memprofile, "inuse_space" for a heap
//		profile.
//	-focus REGEXP
//		Keep only the samples with a frame whose function name
//		matches REGEXP, as pprof -focus does; percentages are of
//		the focused total, which is printed beside the whole.
//		make profile focuses heap profiles on the code under test,
//		so that a benchmark's setup (a 256 MiB heap region, a
//		fragmented pool) does not fill them.
//	-tables LIST
//		The tables to print, "flat", "cum" or "flat,cum" (default).
//
// Pproftop exits 0 on success, 1 when the profile cannot be read or
// does not have the requested value, and 2 on a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/kvalloc/kvalloc/bench/internal/proftop"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pproftop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 10, "print the top `N` functions of each table")
	sampleIndex := fs.String("sample_index", "", "rank by sample value `NAME` (cpu, samples, alloc_space, inuse_space, ...) or index; default: the profile's default sample type")
	focus := fs.String("focus", "", "keep only samples with a frame matching `REGEXP`")
	tables := fs.String("tables", "flat,cum", "tables to print: flat, cum or flat,cum")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: pproftop [-n 10] [-sample_index NAME] [-focus REGEXP] [-tables flat,cum] profile.out\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "pproftop: want exactly one profile, got %d arguments\n", fs.NArg())
		fs.Usage()
		return 2
	}
	if *n < 1 {
		fmt.Fprintf(stderr, "pproftop: -n must be at least 1\n")
		return 2
	}
	var focusRE *regexp.Regexp
	if *focus != "" {
		var err error
		if focusRE, err = regexp.Compile(*focus); err != nil {
			fmt.Fprintf(stderr, "pproftop: bad -focus: %v\n", err)
			return 2
		}
	}
	want := map[string]bool{}
	for _, t := range strings.Split(*tables, ",") {
		if t != "flat" && t != "cum" {
			fmt.Fprintf(stderr, "pproftop: bad -tables %q: want flat, cum or flat,cum\n", *tables)
			return 2
		}
		want[t] = true
	}
	if err := top(stdout, fs.Arg(0), *sampleIndex, *n, focusRE, want); err != nil {
		fmt.Fprintf(stderr, "pproftop: %v\n", err)
		return 1
	}
	return 0
}

func top(w io.Writer, path, sampleIndex string, n int, focus *regexp.Regexp, tables map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	all, err := proftop.Functions(p, sampleIndex)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	t := all
	if focus != nil {
		if t, err = proftop.Functions(proftop.Focus(p, focus), sampleIndex); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	name := ""
	if len(p.Mapping) > 0 && p.Mapping[0].File != "" {
		name = filepath.Base(p.Mapping[0].File) + ", "
	}
	fmt.Fprintf(w, "%s%s (%s): total %s", name, t.Type, t.Unit, proftop.FormatValue(all.Total, t.Unit))
	if focus != nil {
		fmt.Fprintf(w, ", %s of it under -focus %s", proftop.FormatValue(t.Total, t.Unit), focus)
	}
	fmt.Fprintln(w)
	if tables["flat"] {
		fmt.Fprintf(w, "top %d by flat:\n", min(n, len(t.Funcs)))
		if err := t.WriteTop(w, t.ByFlat(), n); err != nil {
			return err
		}
	}
	if tables["cum"] {
		fmt.Fprintf(w, "top %d by cum:\n", min(n, len(t.Funcs)))
		return t.WriteTop(w, t.ByCum(), n)
	}
	return nil
}
