package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
)

// l2Flags are kvallocd's flags for its L2 tier.
type l2Flags struct {
	url             string
	timeout         time.Duration
	queue, batch    int
	batchBytes      string
	putBatch        int
	putWorkers      int
	breakerFailures int
	breakerCooldown time.Duration
	prefix          string
	maxPrefetch     int
	minRate         float64 // GB/s
	probeInterval   time.Duration
	pieceSize       string
	// The L2's security (l2sec.go).
	sec l2SecFlags
}

func (f *l2Flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "l2", "", "the L2 tier: redis[s][+cluster|+plain]://[user@]host:port[,host:port...], a Redis Cluster's seed nodes or one plain Redis (rediss: TLS; user: a Redis ACL user; no password: -l2-password-file); empty for none")
	fs.DurationVar(&f.timeout, "l2-timeout", l2.DefaultTimeout, "bound of each L2 call to each server (a batched get, put or header read), at most 5s: a lookup waits up to one")
	fs.IntVar(&f.queue, "l2-queue", 1024, "finished objects waiting for their copy to L2; past it a copy is dropped and counted")
	fs.IntVar(&f.batch, "l2-batch", 8, "keys per prefetch get: a prefetch loads its keys a get at a time, in order")
	fs.StringVar(&f.batchBytes, "l2-batch-bytes", "64MiB", "a prefetch get takes more than -l2-batch keys while their payloads stay within this")
	fs.IntVar(&f.putBatch, "l2-put-batch", server.DefaultL2PutBatch, "objects per put of the copies to L2")
	fs.IntVar(&f.putWorkers, "l2-put-workers", server.DefaultL2PutWorkers, "puts of the copies to L2 in flight at once")
	fs.IntVar(&f.breakerFailures, "l2-breaker-failures", l2.DefaultBreakerFailures, "failed L2 calls in a row that open the circuit breaker")
	fs.DurationVar(&f.breakerCooldown, "l2-breaker-cooldown", l2.DefaultBreakerCooldown, "how long the open breaker skips L2 before it probes again")
	fs.StringVar(&f.prefix, "l2-prefix", l2.DefaultPrefix, "prefix of every L2 name: daemons with different prefixes share no values")
	fs.IntVar(&f.maxPrefetch, "l2-max-prefetch", 4096, "keys being loaded from L2 at once, over all lookups")
	fs.Float64Var(&f.minRate, "l2-min-rate", server.DefaultL2MinRate/1e9, "break-even of an L2 hit, in GB/s (KV bytes per token × prefill tokens per second; the default is Kimi K2's at 10,000 tokens/s): while the daemon's measured L2 load rate is below it, lookups count L2 hits as misses; 0 counts every hit")
	fs.StringVar(&f.pieceSize, "l2-piece-size", "256KiB", "store each object in L2 as pieces of this size spread over the cluster's masters, read into and written from the pool without a copy; 0 stores whole values (the format before pieces: every daemon of one store must use one setting)")
	fs.DurationVar(&f.probeInterval, "l2-probe-interval", server.DefaultL2ProbeInterval, "while no L2 hit pays, how often one lookup's first batch is loaded anyway, uncounted, to measure the rate again")
	f.sec.register(fs)
}

// open connects to the L2 tier the flags name, into cfg; nothing without
// -l2.
func (f *l2Flags) open(ctx context.Context, cfg *server.Config) error {
	if f.url == "" {
		return nil
	}
	if f.timeout <= 0 || f.queue <= 0 || f.batch <= 0 || f.putBatch <= 0 || f.putWorkers <= 0 || f.breakerFailures <= 0 || f.breakerCooldown <= 0 || f.maxPrefetch <= 0 {
		return fmt.Errorf("-l2-timeout, -l2-queue, -l2-batch, -l2-put-batch, -l2-put-workers, -l2-breaker-failures, -l2-breaker-cooldown and -l2-max-prefetch must be positive")
	}
	if f.timeout > l2.MaxTimeout {
		return fmt.Errorf("-l2-timeout %v is past %v: a lookup waits up to one L2 timeout, and must answer within a client's deadline (10 s by default)", f.timeout, l2.MaxTimeout)
	}
	batchBytes, err := size(f.batchBytes)
	if err != nil {
		return fmt.Errorf("-l2-batch-bytes: %w", err)
	}
	if !(f.minRate >= 0) || math.IsInf(f.minRate, 1) || f.probeInterval <= 0 {
		return fmt.Errorf("-l2-min-rate must be 0 or a positive number of GB/s (got %v), and -l2-probe-interval positive (got %v)", f.minRate, f.probeInterval)
	}
	var pieceSize int64
	if f.pieceSize != "0" {
		if pieceSize, err = size(f.pieceSize); err != nil {
			return fmt.Errorf("-l2-piece-size: %w", err)
		}
	}
	codec, ropts, err := f.sec.open(cfg.Logger)
	if err != nil {
		return err
	}
	ropts.Timeout = f.timeout
	r, err := l2.NewRedis(ctx, f.url, ropts)
	if err != nil {
		return err
	}
	if log := cfg.Logger; log != nil {
		// Advice, off the start's path: a cluster that is down at start
		// is asked for as long as the check waits, and then not again.
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			for _, w := range r.CoverageWarnings(ctx) {
				log.Warn(w)
			}
		}()
	}
	t, err := l2.NewTier(r, l2.Options{Timeout: f.timeout, BreakerFailures: f.breakerFailures,
		BreakerCooldown: f.breakerCooldown, Prefix: f.prefix, Codec: codec, PieceSize: pieceSize})
	if err != nil {
		r.Close()
		return err
	}
	cfg.L2 = server.L2Config{Store: t, Queue: f.queue, Batch: f.putBatch, Workers: f.putWorkers, PrefetchBatch: f.batch, PrefetchBytes: batchBytes, MaxPrefetch: f.maxPrefetch,
		MinRate: f.minRate * 1e9, ProbeInterval: f.probeInterval}
	return nil
}
