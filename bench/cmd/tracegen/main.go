// Command tracegen generates a trace in the Mooncake JSONL format from a
// trace shape file (testdata/scenarios/SHAPES.md), deterministically from
// the shape's seed, so that every replay of the Mooncake trace takes it:
//
//	go run ./bench/cmd/tracegen -o shared-prefix.jsonl testdata/scenarios/shared-prefix.shape
//	go run ./bench/cmd/trace shared-prefix.jsonl
//
// Without -o it writes to standard output. It prints what it wrote
// (conversations, requests, distinct and shared blocks) on standard error.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kvalloc/kvalloc/bench/scenario"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tracegen:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tracegen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "write the trace to this file (default: standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one shape file, got %d arguments", fs.NArg())
	}
	s, err := scenario.ParseShapeFile(fs.Arg(0))
	if err != nil {
		return err
	}
	w := stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		w = f
	}
	st, err := s.Generate(w)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: %d conversations, %d requests, %d block references (%d to shared segments), %d distinct blocks (%d shared)\n",
		s.Name, st.Conversations, st.Requests, st.Refs, st.SharedRefs, st.Blocks, st.SharedBlocks)
	return nil
}
