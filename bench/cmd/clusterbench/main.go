//go:build linux

// Command clusterbench is the node-scale replay of kvalloc's L2 tier: N
// nodes, each with its own l1, sharing one L2, replaying traces (Mooncake
// JSONL files, or trace shape files that it generates) with data-parallel
// routing across the nodes, round-robin and by conversation. For every N,
// L2 size Q and write policy it prints the block hit rates and prefill
// tokens of isolated nodes, of the nodes with L2, and of the ideal bound
// (one LRU of N × l1 + Q), the bytes moved to and from L2 per hit, the
// recommended write policy, and whether an L2 hit beats recomputing at
// the bandwidth of one local redis-server (measured with redis-benchmark;
// -stated uses the project's stated numbers instead).
//
//	go run ./bench/cmd/clusterbench testdata/traces/mooncake-conversation.jsonl.gz testdata/scenarios/shared-prefix.shape
//
// The sweep is bench/cluster's in-process model (package doc). With
// -daemons (the default) isolated nodes, and with -daemons-l2 every Q's
// write-through cell, are replayed again through real kvallocd daemons
// and clients (over a real Redis Cluster for L2) beside the model. It
// prints every table, then exits non-zero if a replay failed or a hit
// rate is further from the model's than -tolerance.
package main

import (
	"context"
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

	"github.com/kvalloc/kvalloc/bench/cluster"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/l2"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "clusterbench:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("clusterbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	l1 := fs.Float64("l1", cluster.DefaultL1Share, "a node's l1: a share of the trace's distinct blocks")
	nodes := fs.String("nodes", "2,4", "node counts N, comma-separated")
	qs := fs.String("q", "0.25,1,4", "L2 sizes Q as multiples of one node's l1, comma-separated")
	block := fs.Int64("block-size", cluster.DefaultBlockSize, "bytes per block, for the bytes moved")
	prefill := fs.Float64("prefill-rate", trace.DefaultPrefillRate, "modelled prefill speed, tokens per second")
	maxReq := fs.Int("max-requests", 0, "replay only the first N requests (0: all)")
	jobs := fs.Int("j", runtime.GOMAXPROCS(0), "concurrent replays")
	stated := fs.Bool("stated", false, "use the stated Redis bandwidths instead of measuring one local redis-server")
	touch := fs.Bool("touch", false, "l1 hits refresh L2's recency too (an asynchronous TOUCH)")
	evict := fs.String("l2-evict", "lru", "L2's eviction: lru (exact) or redis (Redis's sampled allkeys-lru)")
	daemons := fs.Bool("daemons", true, "replay isolated nodes through real daemons and clients, and fail if their hit rates differ from the model's by more than -tolerance")
	daemonL2 := fs.Bool("daemons-l2", true, "with -daemons, also replay write-through over a real Redis Cluster for every Q")
	tol := fs.Float64("tolerance", cluster.DefaultTolerance, "the daemons' largest allowed distance from the model, in block hit rate")
	out := fs.String("out", "", "directory for cluster.md; empty: none")
	pieces := fs.String("l2-piece-sizes", fmt.Sprint(l2.DefaultPieceSize)+",0", "the L2 formats whose tier bandwidth is measured, as kvallocd's -l2-piece-size, comma-separated: bytes per piece, 0 for whole values")
	payAt := fs.Int64("pays-value-size", 8<<20, "the object size whose measured GET rate judges which L2 hits clear -l2-min-rate (the L2 hits counted table)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: clusterbench [flags] FILE...  (Mooncake JSONL traces or .shape files)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("want at least one trace or shape file")
	}
	p := cluster.DefaultPlan()
	p.L1Share, p.Jobs, p.Touch = *l1, *jobs, *touch
	p.Options = trace.Options{BlockSize: *block, PrefillRate: *prefill, MaxRequests: *maxReq}
	switch *evict {
	case "lru":
	case "redis":
		p.L2Evict = cluster.RedisLRU
	default:
		return fmt.Errorf("-l2-evict %q: want lru or redis", *evict)
	}
	var err error
	if p.Nodes, err = ints(*nodes); err != nil {
		return err
	}
	if p.Q, err = floats(*qs); err != nil {
		return err
	}
	pieceSizes, err := pieceSizes(*pieces)
	if err != nil {
		return err
	}
	var reps []*cluster.Report
	for _, path := range fs.Args() {
		tr, _, err := cluster.LoadTrace(path)
		if err != nil {
			return err
		}
		t0 := time.Now()
		rep, err := cluster.Sweep(tr, p)
		if err != nil {
			return err
		}
		rep.Elapsed = time.Since(t0).Seconds()
		fmt.Fprintf(stderr, "%s: %d replays in %.1fs\n", tr.Name, len(rep.Cells)*len(p.Writes)+len(p.Nodes)*(len(p.Routings)+len(p.Q)), rep.Elapsed)
		reps = append(reps, rep)
	}
	// The daemons: isolated nodes, and write-through (kvallocd's only
	// write policy) over a real Redis Cluster for every Q. A replay that
	// fails is a row with its error, and fails the command at the end.
	var drows []cluster.DaemonRow
	if *daemons {
		wt := indexOf(p.Writes, cluster.WriteThrough)
		for _, r := range reps {
			for _, c := range r.Cells {
				var models []*cluster.Result
				if c.Q == r.Plan.Q[0] {
					models = append(models, c.Isolated)
				}
				if *daemonL2 && p.Writes[wt] == cluster.WriteThrough {
					models = append(models, c.Tiered[wt])
				}
				for _, m := range models {
					var low *cluster.Result
					if m.Config.L2 > 0 {
						lc := m.Config
						lc.L2Evict = cluster.RandomEvict
						if low, err = cluster.Run(r.Trace, lc); err != nil {
							return err
						}
					}
					cfg := m.Config
					cfg.Options.BlockSize = 0
					t0 := time.Now()
					got, err := cluster.RunDaemons(r.Trace, cfg)
					drows = append(drows, cluster.DaemonRow{Model: m, Low: low, Daemons: got, Err: err, Wall: time.Since(t0).Seconds()})
					fmt.Fprintf(stderr, "%s: %s through daemons in %.1fs: %v\n", r.Trace.Name, cfg.Name(), time.Since(t0).Seconds(), err)
				}
			}
		}
	}
	// Redis's sampled eviction beside exact LRU, for the recommended
	// policy.
	rec := cluster.Judge(reps).Recommend
	var evicts []*cluster.Report
	if p.L2Evict == cluster.ExactLRU {
		rp := p
		rp.L2Evict, rp.Writes = cluster.RedisLRU, []cluster.WritePolicy{rec}
		for _, r := range reps {
			er, err := cluster.Sweep(r.Trace, rp)
			if err != nil {
				return err
			}
			evicts = append(evicts, er)
		}
	}
	bws, source := cluster.StatedBandwidths, "stated: one local redis-server 7.0 on the loaded 2-core development VM (redis-benchmark)"
	if !*stated {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if bws, err = cluster.MeasureRedis(ctx, cluster.DefaultValueSizes, 4, 512<<20); err != nil {
			return err
		}
		for _, ps := range pieceSizes {
			tier, err := cluster.MeasureTier(ctx, cluster.DefaultValueSizes, 16, 256<<20, ps)
			if err != nil {
				return err
			}
			bws = append(bws, tier...)
		}
		source = "measured now on loopback: redis-benchmark -c 4, no pipelining, against one redis-server; and the l2 package's Tier (with a MAC secret, as kvallocd runs; batches of up to 16 objects, each checked on every get; whole values through go-redis's pipelines, pieces through the tier's own connections) over a Redis Cluster of 3 masters, once per -l2-piece-sizes"
	}
	write := func(w io.Writer, md bool) error {
		if err := cluster.Write(w, reps, md); err != nil {
			return err
		}
		for i, er := range evicts {
			fmt.Fprintf(w, "%s: %s with L2 under exact LRU and under Redis's sampled allkeys-lru (maxmemory-samples %d):\n\n", reps[i].Trace.Name, rec, cluster.RedisSamples)
			one := *reps[i]
			one.Plan.Writes = []cluster.WritePolicy{rec}
			one.Cells = nil
			for _, c := range reps[i].Cells {
				cc := *c
				cc.Tiered = []*cluster.Result{c.Tiered[indexOf(p.Writes, rec)]}
				one.Cells = append(one.Cells, &cc)
			}
			t := cluster.EvictTable(&one, er, rec)
			var err error
			if md {
				err = t.WriteMarkdown(w)
			} else {
				err = t.WriteText(w)
			}
			if err != nil {
				return err
			}
		}
		if len(drows) > 0 {
			fmt.Fprintf(w, "Through real kvallocd daemons (one per node, own socket and memfd pool, blocks of %s, l1 policy %s) and clients: lookup with prefetch, then the prefix read that waits (%v), every byte of every hit checked; with L2, write-through over a Redis Cluster of 3 masters sized to Q values, allkeys-lru. Isolated nodes agree within -tolerance of the model; with L2, the daemons must lie between the model with random eviction in L2 and with exact LRU (±%s): Redis's LRU clock ticks once a second, and this replay runs an hour of traffic in seconds:\n\n", sim.FormatSize(cluster.DaemonBlockSize), cluster.DaemonPolicy, cluster.DaemonWait, sim.PercentPoints(cluster.BandTolerance, 1))
			t := cluster.DaemonTable(drows, *tol)
			var err error
			if md {
				err = t.WriteMarkdown(w)
			} else {
				err = t.WriteText(w)
			}
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(w, "Does an L2 hit beat recomputing? L2 bandwidth %s; prefill per the replay's timing model (%.0f tokens/s, blocks of %d tokens):\n\n", source, *prefill, trace.DefaultBlockTokens)
		for _, b := range bws {
			fmt.Fprintf(w, "- %s\n", b)
		}
		fmt.Fprintln(w)
		t := cluster.BreakEvenTable(bws, cluster.KVModels, trace.DefaultBlockTokens, *prefill)
		var err error
		if md {
			err = t.WriteMarkdown(w)
		} else {
			err = t.WriteText(w)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\nThe L2 hits a daemon counts: write-through's L2 hits, all of them when the tier's GET rate for objects of %s clears -l2-min-rate set at the model's break-even, none when it does not (the rate rule):\n\n", sim.FormatSize(*payAt))
		t = cluster.PaysTable(reps, bws, cluster.KVModels, *payAt, *prefill)
		if md {
			return t.WriteMarkdown(w)
		}
		return t.WriteText(w)
	}
	if err := write(stdout, false); err != nil {
		return err
	}
	var disagree []error
	for _, r := range drows {
		if err := r.Agree(*tol); err != nil {
			disagree = append(disagree, err)
		}
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(*out, "cluster.md"))
		if err != nil {
			return err
		}
		err = errors.Join(sim.WritePreamble(f, "# The cluster replay\n\n`make cluster-bench` (bench/cmd/clusterbench)."), write(f, true))
		if err = errors.Join(err, f.Close()); err != nil {
			return err
		}
	}
	return errors.Join(disagree...)
}

// pieceSizes parses -l2-piece-sizes: bytes per piece, 0 for whole
// values.
func pieceSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 0 || n > 1<<30 {
			return nil, fmt.Errorf("-l2-piece-sizes %q: want bytes per piece (0 for whole values, at most 1 GiB)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			return nil, fmt.Errorf("node count %q: want 1 to 256", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func floats(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(x > 0) || x > 1e6 {
			return nil, fmt.Errorf("L2 size %q: want a positive multiple of one node's l1", f)
		}
		out = append(out, x)
	}
	return out, nil
}

func indexOf(ws []cluster.WritePolicy, w cluster.WritePolicy) int {
	for i, x := range ws {
		if x == w {
			return i
		}
	}
	return 0
}
