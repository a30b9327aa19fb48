//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kvalloc/kvalloc/bench/trace"
)

func main() {
	if os.Getenv(envRole) == roleClient {
		os.Exit(clientMain())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the soak and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if err := soak(cfg, stdout); err != nil {
		fmt.Fprintln(stdout, "FAIL:", err)
		return 1
	}
	fmt.Fprintln(stdout, "PASS")
	return 0
}

// config is the soak's configuration, from the flags.
type config struct {
	daemon, trace         string
	duration, verifyEvery time.Duration
	minute, warmup        time.Duration
	clients, cycle, kill  int
	pool                  trace.Pool
	object, rssSlack      int64
	seed                  uint64
	verbose               bool
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("kvallocsoak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kvallocsoak -daemon PATH [flags] TRACE  (go doc github.com/kvalloc/kvalloc/cmd/kvallocsoak)")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.daemon, "daemon", "", "the kvallocd binary (required)")
	fs.DurationVar(&c.duration, "duration", 10*time.Minute, "how long the clients run")
	fs.IntVar(&c.clients, "clients", 8, "client processes")
	fs.IntVar(&c.cycle, "cycle", 100, "requests per cycle")
	fs.IntVar(&c.kill, "kill-every", 20, "one cycle in N ends by SIGKILL; 0 kills none")
	pool := fs.String("pool", "0.1", "the pool: a fraction of the trace's distinct blocks, or a size such as 40GiB")
	object := fs.String("object", "8MiB", "bytes per object")
	fs.DurationVar(&c.verifyEvery, "verify-every", 5*time.Second, "period of the daemon's Verify")
	fs.DurationVar(&c.minute, "minute", time.Minute, "the period of a row")
	fs.DurationVar(&c.warmup, "warmup", 30*time.Second, "how long after the pool first fills the daemon's RssAnon is still warming up")
	slack := fs.String("rss-slack", "64MiB", "RssAnon allowed above its warm value")
	fs.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "the kills' and the clients' seed")
	fs.BoolVar(&c.verbose, "v", false, "the daemon's log and the clients' stderr on failure, in full")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	bad := func(format string, a ...any) (config, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintln(stderr, "kvallocsoak:", err)
		return c, err
	}
	if fs.NArg() != 1 {
		return bad("want one trace file, got %q", fs.Args())
	}
	c.trace = fs.Arg(0)
	var err error
	if c.pool, err = trace.ParsePool(*pool); err != nil {
		return bad("-pool: %v", err)
	}
	if c.object, err = parseSize(*object); err != nil {
		return bad("-object: %v", err)
	}
	if c.rssSlack, err = parseSize(*slack); err != nil {
		return bad("-rss-slack: %v", err)
	}
	switch {
	case c.daemon == "":
		return bad("-daemon is required: the kvallocd binary")
	case c.duration <= 0 || c.verifyEvery <= 0 || c.minute <= 0 || c.warmup < 0:
		return bad("-duration, -verify-every and -minute must be positive, -warmup at least 0")
	case c.clients < 1 || c.cycle < 1 || c.kill < 0:
		return bad("-clients and -cycle must be at least 1, -kill-every at least 0")
	case c.object < stampSize*2:
		return bad("-object %d: at least %d bytes, for the two stamps", c.object, 2*stampSize)
	}
	return c, nil
}

// parseSize parses a byte size with its unit, such as 8MiB, with
// bench/trace's parser of pool sizes.
func parseSize(s string) (int64, error) {
	p, err := trace.ParsePool(s)
	if err == nil && p.Bytes == 0 {
		err = fmt.Errorf("%q: want a size with a unit (B, KiB, MiB, GiB, TiB)", s)
	}
	return p.Bytes, err
}
