// Devicecheck runs kvalloc's pinned host memory against a real NVIDIA GPU:
// the check to run once on a machine that has one (make device-check).
//
// Usage:
//
//	devicecheck [-pool SIZE] [-block SIZE] [-copies N] [-timeout D]
//
// It loads the CUDA runtime with purego (no cgo), then, within -timeout
// (default and at most 5m):
//
//  1. allocates a CUDA-host region (hostmem.NewCUDAHostRegion,
//     cudaHostAlloc) of two blocks;
//  2. builds two pools of -pool bytes (default 8GiB) pinned with
//     cudaHostRegister (hostmem.NewSegmentedRegion, PinCUDA): a segmented
//     region of anonymous memory, and a memfd pool as the node daemon maps
//     it (SegmentedOptions.Memfd: a sealed memfd, MAP_SHARED), one after
//     the other, timing the first 8 MiB allocation an allocator over each
//     serves and the moment the whole pool is pinned;
//  3. copies -block (default 8MiB) blocks host to device and device to host
//     with cudaMemcpy, -copies times each way (default 64), from each
//     pinned region and from pageable memory (a Go heap buffer), and after
//     one round trip from each compares every byte.
//
// It prints, per source: GiB/s each way and the ratio to pageable memory;
// for each pool: time to first allocation ÷ time to pin the whole pool. SIZE is bytes with an optional KiB, MiB or GiB suffix.
//
// Exit status: 0 when every round trip is exact; 1 when a round trip
// differs or a step fails (the message names it); 2 on a usage error; 3
// when there is no GPU to check ("no GPU: ..." says what is missing: the
// CUDA runtime library, a driver, a device): nothing was checked, which
// is not a pass.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/hostmem"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, realEnv()))
}

// maxTimeout bounds the whole check.
const maxTimeout = 5 * time.Minute

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	exitNoGPU = 3
)

// run is the whole command over env; it returns the exit status.
func run(args []string, stdout, stderr io.Writer, e env) int {
	fs := flag.NewFlagSet("devicecheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pool := fs.String("pool", "8GiB", "size of each pool pinned with cudaHostRegister")
	block := fs.String("block", "8MiB", "size of one copied block")
	copies := fs.Int("copies", 64, "copies each way per source")
	timeout := fs.Duration("timeout", maxTimeout, "bound on the whole check, at most 5m")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: devicecheck [-pool SIZE] [-block SIZE] [-copies N] [-timeout D]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	o := options{copies: *copies, timeout: *timeout}
	var err error
	if o.pool, err = parseSize(*pool); err == nil {
		o.block, err = parseSize(*block)
	}
	switch {
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	case o.block <= 0 || o.block%4096 != 0:
		err = fmt.Errorf("-block %d: must be a positive multiple of 4 KiB", o.block)
	case o.pool < 2*o.block:
		err = fmt.Errorf("-pool %d: must hold two blocks of %d", o.pool, o.block)
	case o.copies < 1:
		err = fmt.Errorf("-copies %d: must be at least 1", o.copies)
	case o.timeout <= 0 || o.timeout > maxTimeout:
		err = fmt.Errorf("-timeout %v: must be in (0, %v]", o.timeout, maxTimeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "devicecheck: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := check(ctx, e, o, stdout); err != nil {
		if errors.Is(err, errNoGPU) {
			fmt.Fprintf(stderr, "devicecheck: %v; nothing was checked\n", err)
			return exitNoGPU
		}
		fmt.Fprintf(stderr, "devicecheck: FAIL: %v\n", err)
		return exitFail
	}
	fmt.Fprintln(stdout, "devicecheck: PASS: every round trip exact")
	return exitOK
}

// parseSize reads "8MiB", "45GiB", "4096".
func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = rest, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, KiB, MiB or GiB", s)
	}
	return n * mult, nil
}

// realEnv is the machine: the CUDA runtime, cudaHostAlloc regions, and the
// runtime's own cudaHostRegister.
func realEnv() env {
	return env{
		open:        openCUDA,
		newCUDAHost: hostmem.NewCUDAHostRegion,
	}
}
