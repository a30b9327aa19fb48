// Command trace replays serving traces in the Mooncake JSONL format through
// l1 over the allocator, under every policy of bench/trace's table, beside
// an ideal LRU and Belady's optimal policy of the same size, and prints a
// table per pool size, hit rate first.
//
// Usage:
//
//	trace [flags] FILE...
//
// Each FILE is a trace, gzipped or not: one JSON object per line with
// timestamp (ms), input_length, output_length and hash_ids (see package
// github.com/kvalloc/kvalloc/bench/trace for the request model and the
// metrics). Every FILE is replayed on its own, at every pool size, on
// simulated time; replays are deterministic but for the wall-time columns
// and are spread over -j goroutines.
//
// Flags:
//
//	-pool LIST          pool sizes, comma-separated: fractions of the trace's distinct
//	                    blocks in (0, 1], or byte sizes such as 4GiB (default 0.1,0.25,0.5)
//	-policies LIST      policy names of the table, comma-separated, a trailing * matches
//	                    a prefix (default all)
//	-block-size SIZE    bytes per block (default 64KiB; the outcome does not depend on it)
//	-block-tokens N     tokens per block of the trace (default 512)
//	-prefill-rate R     modelled prefill, tokens per second (default 10000)
//	-rate X             arrival-rate multiplier: >1 replays faster (default 1)
//	-sweep-every D      period of the periodic controller (default 1s)
//	-watermark F        usage at which the periodic controller evicts (default 0.8)
//	-sweep-ratio F      share of the objects it then evicts (default 0.2)
//	-max-requests N     replay only the first N requests (default 0: all)
//	-out DIR            where NAME.md and, with two or more pools, NAME-hitrate.{svg,png}
//	                    go, NAME being the file's base name; "" writes none (default "")
//	-j N                concurrent replays (default GOMAXPROCS)
//	-rounds N           replays of each row; they must agree, and the timing columns keep
//	                    the fastest (default 3)
//	-phases             also print ns per block reference by phase (lookup, store, finish,
//	                    sweep) for every row
//
// Example, as make trace runs it:
//
//	go run ./bench/cmd/trace -out bench/out testdata/traces/mooncake-conversation.jsonl.gz
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "trace:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pools := fs.String("pool", "0.1,0.25,0.5", "pool sizes: fractions of the distinct blocks, or byte sizes (4GiB)")
	policies := fs.String("policies", "all", "policies to replay, comma-separated; a trailing * matches a prefix")
	blockSize := fs.String("block-size", "64KiB", "bytes per block")
	blockTokens := fs.Int64("block-tokens", trace.DefaultBlockTokens, "tokens per block of the trace")
	prefill := fs.Float64("prefill-rate", trace.DefaultPrefillRate, "modelled prefill speed, tokens per second")
	rate := fs.Float64("rate", 1, "arrival-rate multiplier")
	every := fs.Duration("sweep-every", sim.DefaultSweepEvery, "period of the periodic controller")
	watermark := fs.Float64("watermark", sim.DefaultWatermark, "usage at which the periodic controller evicts")
	ratio := fs.Float64("sweep-ratio", sim.DefaultSweepRatio, "share of the objects the periodic controller evicts")
	maxReq := fs.Int("max-requests", 0, "replay only the first N requests (0: all)")
	out := fs.String("out", "", "directory for NAME.md and the plots; empty: none")
	jobs := fs.Int("j", runtime.GOMAXPROCS(0), "concurrent replays")
	rounds := fs.Int("rounds", 3, "replays of each row; the timing columns keep the fastest")
	phases := fs.Bool("phases", false, "also print each row's ns per block reference by phase of the request model")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: trace [flags] FILE...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no trace file")
	}
	ps, err := trace.ParsePools(*pools)
	if err != nil {
		return err
	}
	pols, err := trace.SelectPolicies(*policies)
	if err != nil {
		return err
	}
	bs, err := parseBytes(*blockSize)
	if err != nil {
		return err
	}
	o := trace.Options{
		BlockSize: bs, PrefillRate: *prefill, Rate: *rate,
		SweepEvery: *every, Watermark: *watermark, SweepRatio: *ratio, MaxRequests: *maxReq,
	}
	for _, path := range fs.Args() {
		start := time.Now()
		tr, err := trace.ReadFile(path, *blockTokens)
		if err != nil {
			return err
		}
		parse := time.Since(start)
		tables, err := trace.Sweep(tr, ps, pols, o, *jobs, *rounds)
		if err != nil {
			return err
		}
		if err := trace.WriteText(stdout, tables); err != nil {
			return err
		}
		if *phases {
			if err := trace.WritePhases(stdout, tables); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "%s: parsed in %s; %d replays (%d rounds of %d rows) in %s on %d goroutines (%d CPUs)\n\n",
			path, parse.Round(time.Millisecond), *rounds*len(tables)*(len(pols)+2), *rounds, len(tables)*(len(pols)+2),
			time.Since(start).Round(time.Millisecond), *jobs, runtime.NumCPU())
		if *out == "" {
			continue
		}
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		name := trace.BaseName(path)
		var md bytes.Buffer
		if err := trace.WriteMarkdown(&md, tables, preamble(path, args, o)); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, name+".md"), md.Bytes(), 0o644); err != nil {
			return err
		}
		if len(tables) >= 2 {
			for _, ext := range []string{".svg", ".png"} {
				if err := trace.WritePlotFile(filepath.Join(*out, name+"-hitrate"+ext), tables); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// parseBytes parses -block-size: a whole number of bytes, with or without
// a unit (4096, 64KiB, 8MiB).
func parseBytes(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return n, nil
	}
	p, err := trace.ParsePool(s)
	if err != nil || p.Bytes == 0 {
		return 0, fmt.Errorf("-block-size %q: want a byte size such as 4096 or 64KiB", s)
	}
	return p.Bytes, nil
}

// preamble explains the markdown report's columns.
func preamble(path string, args []string, o trace.Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Trace replay: %s\n\n", filepath.Base(path))
	fmt.Fprintf(&b, "Generated by `go run ./bench/cmd/trace %s` (%s, %d CPUs). Every number but the ns columns is deterministic.\n\n",
		strings.Join(args, " "), runtime.Version(), runtime.NumCPU())
	b.WriteString("Request model: at its arrival a request read-locks the longest resident prefix of its blocks (the hits), reserves its missing blocks in one ReserveWrite, and after (input − hit tokens) ÷ prefill rate finishes the writes and releases the reads. Rows are l1 configurations over the allocator; **ideal LRU** and **Belady** are allocator-free bounds of the same number of blocks under the same model.\n\n")
	b.WriteString("- **hit rate**: hit blocks ÷ block references; **token hit**: hit tokens ÷ input tokens (a fully hit request counts its whole input, the last block may be partial).\n")
	b.WriteString("- **evict prefill**: missed blocks that had been stored and were evicted since (eviction-induced prefill); **orphans**: missed blocks that were resident behind the request's first miss.\n")
	b.WriteString("- **Δ LRU**, **Δ Belady**: hit rate minus the bound's, in percentage points.\n")
	b.WriteString("- **ns/op ÷ LRU**: the row's wall time in its cache calls ÷ the ideal LRU's; **ns/block op**: that time per block reference. Shared machine: ratios only.\n")
	b.WriteString("- **granted**, **OOM keys**: keys ReserveWrite allocated and answered OutOfMemory; **failed calls**: ReserveWrite calls with an OOM key; **failed w/ free**: those made while the allocator had the bytes for the whole call.\n")
	b.WriteString("- **alloc calls**: l1's calls into the allocator; **evictions**: objects evicted (on demand, by the sweep, or by the bound).\n")
	b.WriteString("- **frag**: 1 − largest free extent ÷ free bytes; **usage**: used ÷ capacity; sampled after every request's store.\n")
	return b.String()
}
