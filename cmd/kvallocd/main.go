//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

func main() {
	// A write to a stderr (or stdout) whose reader is gone must fail with
	// EPIPE, which the daemon's logger counts, and never kill the daemon:
	// Go exits on SIGPIPE from fd 1 or 2 unless SIGPIPE is handled.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A hangup (the terminal or session it was started from going away)
	// must not end the node's cache either: it is logged and ignored.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	os.Exit(run(ctx, os.Args[1:], os.Stderr, hup))
}

// run parses args, starts the daemon, and serves until ctx ends; a value
// on hup is logged and ignored.
func run(ctx context.Context, args []string, stderr io.Writer, hup <-chan os.Signal) int {
	var l2f l2Flags
	cfg, level, err := parse(args, stderr, &l2f)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if errors.Is(err, errVersion) {
		fmt.Fprint(stdout, versionText())
		return 0
	}
	if err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = log
	cfg.Systemd = true // takes effect only under systemd's variables
	if err := l2f.open(ctx, &cfg); err != nil {
		log.Error("kvallocd cannot start its L2 tier", "err", err)
		return 1
	}
	s, err := server.New(cfg)
	if err != nil {
		log.Error("kvallocd cannot start", "err", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	for stopped := false; !stopped; {
		select {
		case <-hup:
			log.Warn("SIGHUP ignored: kvallocd stops on SIGTERM or SIGINT")
		case <-ctx.Done():
			log.Info("shutting down on a signal")
			err = s.Close()
			<-done
			stopped = true
		case err = <-done:
			select {
			case <-s.HandedOff(): // a successor serves the pool: exit 0
			default:
				if err == nil {
					// Not stopped, and no successor: a supervisor must
					// start another (Restart=on-failure).
					err = errors.New("the daemon stopped serving without a successor")
				}
			}
			s.Close()
			stopped = true
		}
	}
	if err != nil {
		log.Error("kvallocd stopped", "err", err)
		return 1
	}
	return 0
}

// stdout is where -version prints.
var stdout io.Writer = os.Stdout

// errVersion is parse's answer to -version: print versionText and exit 0.
var errVersion = errors.New("-version")

// parse reads the flags into a server configuration.
func parse(args []string, stderr io.Writer, l2f *l2Flags) (server.Config, slog.Level, error) {
	cfg := server.Defaults()
	fs := flag.NewFlagSet("kvallocd", flag.ContinueOnError)
	l2f.register(fs)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: kvallocd [flags]  (go doc github.com/kvalloc/kvalloc/cmd/kvallocd)")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.SocketPath, "socket", wire.DefaultSocketPath(), "the Unix socket")
	mode := fs.String("socket-mode", "0600", "the socket file's mode, octal")
	uids := fs.String("allow-uid", "", "uids served, comma-separated (default: the daemon's own)")
	gids := fs.String("allow-gid", "", "gids served, comma-separated")
	pool := fs.String("pool-size", "1GiB", "the pool's size: bytes, or with KiB, MiB, GiB, TiB")
	fs.Int64Var(&cfg.Align, "align", allocator.DefaultAlign, "block alignment in bytes, a power of two")
	fs.BoolVar(&cfg.Pool.HugePages, "hugepages", false, "back the pool with hugetlbfs pages (MFD_HUGETLB)")
	fs.BoolVar(&cfg.Pool.Populate, "populate", true, "fault the pool in, in the background, before serving each segment")
	fs.BoolVar(&cfg.Pool.Lock, "mlock", false, "pin each segment once populated (bounded by RLIMIT_MEMLOCK)")
	seg := fs.String("segment-size", "64MiB", "the unit of population")
	placement := fs.String("placement", cfg.L1.Placement.String(), "scattered, contiguous-first or contiguous")
	fs.TextVar(&cfg.L1.Eviction, "eviction", cfg.L1.Eviction, "lru, prefix or s3fifo")
	fs.BoolVar(&cfg.L1.EvictOnDemand, "evict-on-demand", true, "evict when a reservation does not fit")
	fs.DurationVar(&cfg.L1.WriteTTL, "write-ttl", l1.DefaultWriteTTL, "write-lock lifetime: the backstop for a stuck writer")
	fs.DurationVar(&cfg.L1.ReadTTL, "read-ttl", l1.DefaultReadTTL, "read-lock lifetime")
	fs.DurationVar(&cfg.FrameTimeout, "frame-timeout", server.DefaultFrameTimeout, "time from a frame's first byte to its last")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", server.DefaultWriteTimeout, "time to write one answer")
	fs.Int64Var(&cfg.ConnReadLocks, "conn-read-locks", server.DefaultConnReadLocks, "read locks one connection may hold; a call past it is cut, its tail answered OVER_LIMIT")
	connWrite := fs.String("conn-write-bytes", "64GiB", "bytes one connection's write reservations may ask for; a reserve_write past it is cut, its tail answered OVER_LIMIT")
	maxFrame := fs.String("max-frame", "16MiB", "the largest request frame, header included (4KiB to 16MiB); a larger one is answered TOO_LARGE and closed")
	fs.DurationVar(&cfg.HelloTimeout, "hello-timeout", server.DefaultHelloTimeout, "time from accept to the end of a connection's hello")
	fs.IntVar(&cfg.MaxConns, "max-conns", server.DefaultMaxConns, "connections open at once, at most")
	fs.IntVar(&cfg.MaxConnsPerUID, "max-conns-per-uid", server.DefaultMaxConnsPerUID, "connections open at once from one peer uid, at most")
	budget := fs.String("buffer-budget", "256MiB", "bytes of frame buffers all connections share, at least 20MiB")
	fs.StringVar(&cfg.MetricsAddr, "metrics", "", "serve /metrics on this loopback address, e.g. 127.0.0.1:9464")
	fs.BoolVar(&cfg.DebugVerify, "debug-verify", false, "serve /debug/verify with -metrics, and judge out-of-memory answers against the evictable objects left; for soaks, it serializes reserve_write")
	fs.DurationVar(&cfg.RestartHold, "restart-hold", server.DefaultRestartHold, "how long a restart (-takeover, or a stop under systemd's fd store) keeps a block whose lease has no expiry (a -write-ttl that never lapses, a lapsed write waiting for its writer); every other leased block is kept until its lease would have lapsed")
	fs.BoolVar(&cfg.Takeover, "takeover", false, "take the pool and its finished objects over from the kvallocd serving -socket (its handoff socket, -socket + \".handoff\"); start cold, and say why, when that fails")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "debug, info, warn or error")
	version := fs.Bool("version", false, "print the module version and the protocol version, and exit")
	if err := fs.Parse(args); err != nil {
		return cfg, level, err
	}
	if *version {
		return cfg, level, errVersion
	}
	bad := func(format string, a ...any) (server.Config, slog.Level, error) {
		err := fmt.Errorf(format, a...)
		fmt.Fprintln(stderr, "kvallocd:", err)
		return cfg, level, err
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments %q", fs.Args())
	}
	m, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || m > 0o777 {
		return bad("-socket-mode %q: want an octal mode such as 0600", *mode)
	}
	cfg.SocketMode = os.FileMode(m)
	if cfg.AllowUIDs, err = ids(*uids); err != nil {
		return bad("-allow-uid: %v", err)
	}
	if cfg.AllowGIDs, err = ids(*gids); err != nil {
		return bad("-allow-gid: %v", err)
	}
	if cfg.PoolSize, err = size(*pool); err != nil {
		return bad("-pool-size: %v", err)
	}
	if cfg.Pool.SegmentSize, err = size(*seg); err != nil {
		return bad("-segment-size: %v", err)
	}
	if cfg.ConnWriteBytes, err = size(*connWrite); err != nil {
		return bad("-conn-write-bytes: %v", err)
	}
	mf, err := size(*maxFrame)
	if err != nil || mf < server.MinMaxFrame || mf > wire.MaxFrame {
		return bad("-max-frame %q: want a size from %d to %d bytes", *maxFrame, server.MinMaxFrame, wire.MaxFrame)
	}
	cfg.MaxFrame = int(mf)
	if cfg.ConnReadLocks < 1 {
		return bad("-conn-read-locks %d: want at least 1", cfg.ConnReadLocks)
	}
	if cfg.RestartHold <= 0 {
		return bad("-restart-hold %v: want a positive duration", cfg.RestartHold)
	}
	if cfg.BufferBudget, err = size(*budget); err != nil {
		return bad("-buffer-budget: %v", err)
	}
	if cfg.MaxConns <= 0 || cfg.MaxConnsPerUID <= 0 || cfg.HelloTimeout <= 0 {
		return bad("-max-conns %d, -max-conns-per-uid %d, -hello-timeout %v: each must be positive", cfg.MaxConns, cfg.MaxConnsPerUID, cfg.HelloTimeout)
	}
	if cfg.L1.Placement, err = allocator.ParsePlacement(*placement); err != nil {
		return bad("-placement: %v", err)
	}
	return cfg, level, nil
}

// ids parses a comma-separated list of ids.
func ids(s string) ([]uint32, error) {
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not an id", f)
		}
		out = append(out, uint32(v))
	}
	return out, nil
}

// size parses "1073741824", "64MiB", "1GiB", "2TiB".
func size(s string) (int64, error) {
	mult := int64(1)
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if strings.HasSuffix(s, u) {
			s, mult = strings.TrimSuffix(s, u), int64(1)<<(10*(i+1))
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v <= 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a positive size (bytes, or with KiB, MiB, GiB, TiB)", s)
	}
	return v * mult, nil
}
