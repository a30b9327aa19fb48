//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// The L2 tier's benchmarks run against one real Redis Cluster (3 masters,
// 3 replicas, on loopback), started once per process and killed by
// TestMain: an L1 hit with L2 on against off, and L2 get and put
// throughput through the daemon against a plain pipelined GET and SET
// loop with the same go-redis client on the same cluster, at three block
// sizes.

var (
	clusterOnce sync.Once
	cluster     *rediscluster.Cluster
	clusterErr  error
)

// closeL2Cluster stops the shared cluster, if a benchmark started one
// (TestMain, after the run).
func closeL2Cluster() {
	if cluster != nil {
		cluster.Close()
	}
	closeL2Stores()
}

// l2URL is the shared cluster's seeds; the benchmark fails (never skips)
// without Redis.
func l2URL(b *testing.B) string {
	b.Helper()
	clusterOnce.Do(func() {
		cluster, clusterErr = rediscluster.Start(context.Background(), rediscluster.Options{MaxMemory: "2gb"})
	})
	if clusterErr != nil {
		b.Fatal(clusterErr)
	}
	return cluster.URL()
}

// l2Daemon is a daemon with an L2 tier on the shared cluster, and a
// client of it.
type l2Daemon struct {
	s     *server.Server
	c     *client.Client
	tier  *l2.Tier
	rd    *l2.Redis
	store *putSignal
}

// putSignal is the daemon's store: the tier, and a signal of its stored
// puts, so that a benchmark waits for them without polling (a poller
// would take CPU from the puts it waits for; the plain loop has none).
type putSignal struct {
	l2.Store
	mu   sync.Mutex
	cond *sync.Cond
	puts uint64
}

// Put implements l2.Store.
func (p *putSignal) Put(ctx context.Context, keys []l1.ObjectKey, values [][]byte) int {
	return p.stored(p.Store.Put(ctx, keys, values))
}

// PutPayloads implements l2.PayloadStore: the daemon's puts straight
// from its pool.
func (p *putSignal) PutPayloads(ctx context.Context, keys []l1.ObjectKey, payloads [][]byte) int {
	return p.stored(p.Store.(l2.PayloadStore).PutPayloads(ctx, keys, payloads))
}

func (p *putSignal) stored(n int) int {
	p.mu.Lock()
	p.puts += uint64(n)
	p.mu.Unlock()
	p.cond.Broadcast()
	return n
}

// The daemon's write-through: puts of up to l2PutBatch objects,
// l2PutWorkers of them in flight (server.L2Config's defaults). The put
// floor sends its SETs in the same shape, so that both sides have the
// same concurrency: on the 2-core VM a pipelined SET of 8 values of
// 8 MiB took 1.0× to 1.2× the time of the same SETs as 4 pipelines of 2
// at once.
const (
	l2PutBatch   = 2
	l2PutWorkers = 8
)

func startL2Daemon(b *testing.B, poolSize int64, withL2 bool, prefix string) *l2Daemon {
	b.Helper()
	cfg := server.Config{SocketPath: filepath.Join(b.TempDir(), "kvallocd.sock"), PoolSize: poolSize}
	d := &l2Daemon{}
	if withL2 {
		rd, err := l2.NewRedis(context.Background(), l2URL(b), l2.RedisOptions{Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		tier, err := l2.NewTier(rd, l2.Options{Timeout: 10 * time.Second, Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		d.store = &putSignal{Store: tier}
		d.store.cond = sync.NewCond(&d.store.mu)
		cfg.L2 = server.L2Config{Store: d.store, Batch: l2PutBatch, Workers: l2PutWorkers}
		d.tier, d.rd = tier, rd
	}
	s, err := server.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve()
	b.Cleanup(func() { s.Close() })
	c, err := client.Dial(s.SocketPath(), client.Options{Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	d.s, d.c = s, c
	return d
}

func l2BenchKeys(tag string, n int) []l1.ObjectKey {
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%s-%05d", tag, i), Model: "bench", KVRank: 0}
	}
	return ks
}

// writeAll reserves, stamps and finishes keys of size on d.
func (d *l2Daemon) writeAll(b *testing.B, keys []l1.ObjectKey, size int64) {
	b.Helper()
	d.finish(b, keys, d.stamp(b, keys, size))
}

// stamp reserves keys of size on d and writes a byte into every page;
// it returns the leases, for finish.
func (d *l2Daemon) stamp(b *testing.B, keys []l1.ObjectKey, size int64) []client.Lease {
	b.Helper()
	res, err := d.c.ReserveWrite(keys, nil, size, l1.ModeAll)
	leases := make([]client.Lease, len(keys))
	daemonLeases(b, "ReserveWrite", res, err, leases)
	for i, r := range res {
		bs, err := d.c.Bytes(r.Block)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < size; off += 4096 {
			bs[off] = byte(i + int(off>>12))
		}
	}
	return leases
}

// finish finishes the writes stamp reserved.
func (d *l2Daemon) finish(b *testing.B, keys []l1.ObjectKey, leases []client.Lease) {
	b.Helper()
	daemonAll(b, "FinishWrite")(d.c.FinishWrite(keys, leases))
}

// waitPuts waits until d's tier has stored want values in all.
func (d *l2Daemon) waitPuts(b *testing.B, want uint64) {
	b.Helper()
	p := d.store
	timeout := false
	t := time.AfterFunc(5*time.Minute, func() {
		p.mu.Lock()
		timeout = true
		p.mu.Unlock()
		p.cond.Broadcast()
	})
	defer t.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.puts < want {
		if timeout {
			b.Fatalf("L2 puts %+v, want %d", d.tier.Stats(), want)
		}
		p.cond.Wait()
	}
}

// BenchmarkL2Hit is an L1 hit, reserve_read_prefix + finish_read of 32
// keys of 8 MiB, on a daemon with an L2 tier (l2=on) and without
// (l2=off): L2 must cost an L1 hit nothing. Reports ns/op.
func BenchmarkL2Hit(b *testing.B) {
	const n = 32
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("l2=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			l2URL(b) // the cluster runs in both, so that both share the machine with it
			d := startL2Daemon(b, 2*n*prodObject, on, "bench-hit:")
			keys := l2BenchKeys("hit", n)
			d.writeAll(b, keys, prodObject)
			if on {
				d.waitPuts(b, n)
			}
			leases := make([]client.Lease, n)
			hit := func() {
				res, p, err := d.c.ReserveReadPrefix(keys, 1)
				if err != nil || p != n {
					b.Fatalf("ReserveReadPrefix: %d, %v", p, err)
				}
				for i := range res {
					leases[i] = res[i].Lease
				}
				daemonAll(b, "FinishRead")(d.c.FinishRead(keys, leases, 1))
			}
			for range 500 { // warm: the write-through's garbage collected, the caches hot
				hit()
			}
			for b.Loop() {
				hit()
			}
		})
	}
}

// l2Sizes are the block sizes of the throughput benchmarks, and the keys
// per op at each (about 8 to 64 MiB an op).
var l2Sizes = []struct {
	name string
	size int64
	keys int
}{{"64KiB", 64 << 10, 128}, {"1MiB", 1 << 20, 16}, {"8MiB", 8 << 20, 8}}

// l2Masters are the stores of the throughput benchmarks: one plain Redis
// (masters=1) and clusters of 3 and 6 masters without replicas, each
// started once per process (the replicas' replication would take the
// same 2 cores from both sides alike; BenchmarkL2Hit keeps its cluster
// with them).
var l2Masters = []int{1, 3, 6}

var (
	storesMu sync.Mutex
	stores   = map[int]string{}
	closers  []func()
)

// closeL2Stores stops the throughput benchmarks' stores (TestMain).
func closeL2Stores() {
	storesMu.Lock()
	defer storesMu.Unlock()
	for _, c := range closers {
		c()
	}
	closers, stores = nil, map[int]string{}
}

// storeURL is the URL of the store of masters masters, started on first
// use; the benchmark fails (never skips) without Redis.
func storeURL(b *testing.B, masters int) string {
	b.Helper()
	storesMu.Lock()
	defer storesMu.Unlock()
	if u, ok := stores[masters]; ok {
		return u
	}
	ctx := context.Background()
	if masters == 1 {
		s, err := rediscluster.StartServer(ctx, rediscluster.Options{MaxMemory: "2gb"})
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, s.Close)
		stores[masters] = s.URL()
	} else {
		c, err := rediscluster.Start(ctx, rediscluster.Options{Masters: masters, Replicas: -1, MaxMemory: "2gb"})
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, c.Close)
		stores[masters] = c.URL()
	}
	return stores[masters]
}

// benchCodec is the throughput benchmarks' MAC codec: a fixed secret of
// MinSecret bytes, as kvallocd runs in production (-l2-secret-file;
// HMAC-SHA-256 of every value or piece by its writer and its reader).
var benchCodec = func() *l2.Codec {
	sec := make([]byte, l2.MinSecret)
	for i := range sec {
		sec[i] = byte(i*7 + 1)
	}
	s, err := l2.NewSecret(sec)
	if err != nil {
		panic(err)
	}
	c, err := l2.NewCodec(s)
	if err != nil {
		panic(err)
	}
	return c
}()

// startPathDaemon is a daemon with an L2 tier on url in pieces of
// pieceSize (0: whole values, the format before pieces) whose values
// carry MACs under codec (l2.Unauthenticated: none).
func startPathDaemon(b *testing.B, url string, poolSize int64, prefix string, pieceSize int64, codec *l2.Codec) *l2Daemon {
	b.Helper()
	cfg := server.Config{SocketPath: filepath.Join(b.TempDir(), "kvallocd.sock"), PoolSize: poolSize}
	rd, err := l2.NewRedis(context.Background(), url, l2.RedisOptions{Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	tier, err := l2.NewTier(rd, l2.Options{Timeout: 10 * time.Second, Prefix: prefix, PieceSize: pieceSize, Codec: codec})
	if err != nil {
		b.Fatal(err)
	}
	d := &l2Daemon{store: &putSignal{Store: tier}, tier: tier, rd: rd}
	d.store.cond = sync.NewCond(&d.store.mu)
	cfg.L2 = server.L2Config{Store: d.store, Batch: l2PutBatch, Workers: l2PutWorkers}
	s, err := server.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	go s.Serve()
	b.Cleanup(func() { s.Close() })
	c, err := client.Dial(s.SocketPath(), client.Options{Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	d.s, d.c = s, c
	return d
}

// pieceNames are the names of keys' pieces of size in pieces of
// DefaultPieceSize, under prefix.
func pieceNames(prefix string, keys []l1.ObjectKey, size int64) []string {
	var names []string
	for i := range keys {
		for j := range l2.PieceCount(size, l2.DefaultPieceSize) {
			names = append(names, l2.PieceName(prefix, &keys[i], j))
		}
	}
	return names
}

// alternate runs the ops of paths one after the other, op by op, until
// b.Loop ends, each returning the time of its timed part; it reports each path's payload
// rate, bytes an op over its summed time: the first as GB/s, the others
// as <path>-GB/s. Alternating op by op puts every path in the same
// seconds of a machine whose load swings (l2/DESIGN.md). Each path first
// runs one op untimed: a fresh daemon's first op faults in its pool's
// pages and dials its connections to every master, and the plain loop's
// dials its, costs a running daemon paid before its first load. Timed,
// that op weighed a third of a run of 3 ops a path (make bench's L2
// rows); untimed, 3 ops measure about what 8 do.
func alternate(b *testing.B, bytes int64, paths []string, ops []func() time.Duration) {
	b.Helper()
	for _, op := range ops {
		op()
	}
	spent := make([]time.Duration, len(ops))
	n := 0
	for b.Loop() {
		for i, op := range ops {
			spent[i] += op()
		}
		n++
	}
	for i, p := range paths {
		unit := p + "-GB/s"
		if i == 0 {
			unit = "GB/s"
		}
		if spent[i] > 0 {
			b.ReportMetric(float64(bytes)*float64(n)/float64(spent[i].Nanoseconds()), unit)
		}
	}
}

// l2Paths are the paths the throughput benchmarks alternate: the daemon
// in pieces with MACs, as kvallocd runs with its secret (GB/s), the
// plain pipelined loop over the same pieces (plain-GB/s), the daemon on
// whole values with MACs, as before pieces (whole-GB/s), and the daemon
// in pieces without a MAC (nomac-GB/s; -l2-insecure-no-mac), which
// shows what the MAC costs.
var l2Paths = []string{"daemon", "plain", "whole", "nomac"}

// l2Daemons are the daemons' configurations of the paths of l2Paths
// other than the plain loop, in order.
var l2Daemons = []struct {
	piece int64
	codec *l2.Codec
}{{l2.DefaultPieceSize, benchCodec}, {0, benchCodec}, {l2.DefaultPieceSize, l2.Unauthenticated}}

// BenchmarkL2Get is L2 get throughput, sub-benchmarks
// path=daemon/size=S/masters=N: op by op alternated (alternate), a node
// loading keys another node put through the daemon in pieces (lookup
// with prefetch, then reserve_read_prefix_wait, finish_read and a
// delete, so that the next op loads them again), with MACs: GB/s; a
// pipelined GET of the same pieces with go-redis's client on the same
// store, every master at once: plain-GB/s; the same daemon op on whole
// values with MACs, the path before pieces: whole-GB/s; and in pieces
// without a MAC: nomac-GB/s. Rates are of payload. BenchmarkL2Get and
// BenchmarkL2Put skip under TestAllocsPerOpIndependentOfN: the client's
// connections and the daemon's put workers allocate at the network's
// pace, not per op.
func BenchmarkL2Get(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("go-redis's connections and the daemon's put workers allocate in the timed region, by the network's pace; not a per-op cost of kvalloc's code")
	}
	for _, sz := range l2Sizes {
		for _, masters := range l2Masters {
			b.Run(fmt.Sprintf("path=daemon/size=%s/masters=%d", sz.name, masters), func(b *testing.B) {
				url := storeURL(b, masters)
				prefix := fmt.Sprintf("bench-get-%s-%d:", sz.name, masters)
				keys := l2BenchKeys("get-"+sz.name, sz.keys)
				pool := 2 * int64(sz.keys) * sz.size
				var loads []func() time.Duration
				for i, p := range l2Daemons {
					// Each configuration under a prefix of its own: pieces
					// with and without MACs are different values.
					pre := prefix
					if i > 0 {
						pre = fmt.Sprintf("%s%d:", prefix, i)
					}
					a := startPathDaemon(b, url, pool, pre, p.piece, p.codec)
					a.writeAll(b, keys, sz.size)
					a.waitPuts(b, uint64(sz.keys))
					d := startPathDaemon(b, url, pool, pre, p.piece, p.codec)
					loads = append(loads, d.loadOp(b, keys))
				}
				rd, err := l2.NewRedis(context.Background(), url, l2.RedisOptions{Timeout: 10 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rd.Close() })
				names := pieceNames(prefix, keys, sz.size)
				c := rd.Client()
				ctx := context.Background()
				plain := func() time.Duration {
					t0 := time.Now()
					cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
						for _, n := range names {
							p.Get(ctx, n)
						}
						return nil
					})
					if err != nil || len(cmds) != len(names) {
						b.Fatalf("pipelined GET: %v", err)
					}
					for _, c := range cmds {
						if v, err := c.(*redis.StringCmd).Bytes(); err != nil || len(v) <= l2.PieceHeaderSize {
							b.Fatalf("GET: %d bytes, %v", len(v), err)
						}
					}
					return time.Since(t0)
				}
				alternate(b, int64(sz.keys)*sz.size, l2Paths, []func() time.Duration{loads[0], plain, loads[1], loads[2]})
			})
		}
	}
}

// loadOp is one get op through d: keys loaded from L2 (lookup with
// prefetch, reserve_read_prefix_wait), released and deleted from L1.
func (d *l2Daemon) loadOp(b *testing.B, keys []l1.ObjectKey) func() time.Duration {
	leases := make([]client.Lease, len(keys))
	return func() time.Duration {
		t0 := time.Now()
		lk, err := d.c.Lookup(keys, true)
		if err != nil || int(lk.Prefetch) != len(keys) {
			b.Fatalf("Lookup: %+v, %v (%+v)", lk, err, d.tier.Stats())
		}
		res, p, err := d.c.ReserveReadPrefixWait(keys, 1, wire.MaxWait*time.Microsecond)
		if err != nil || p != len(keys) {
			b.Fatalf("ReserveReadPrefixWait: %d of %d, %v (%+v)", p, len(keys), err, d.tier.Stats())
		}
		for i := range res {
			leases[i] = res[i].Lease
		}
		daemonAll(b, "FinishRead")(d.c.FinishRead(keys, leases, 1))
		daemonAll(b, "Delete")(d.c.Delete(keys, false))
		return time.Since(t0)
	}
}

// BenchmarkL2Put is L2 put throughput, sub-benchmarks
// path=daemon/size=S/masters=N: op by op alternated (alternate),
// write-through in pieces with MACs, from the finish_write of fresh
// objects (reserved and written between the ops: the engine's work, not
// L2's) until the daemon has stored them all: GB/s; a pipelined SET of the
// same pieces (header and payload, made before) with go-redis's client
// on the same store, in the daemon's shape, pipelines of l2PutBatch
// objects' pieces, up to l2PutWorkers at once: plain-GB/s; the same
// write-through on whole values with MACs, the path before pieces:
// whole-GB/s; and in pieces without a MAC: nomac-GB/s. Rates are of
// payload.
func BenchmarkL2Put(b *testing.B) {
	if os.Getenv(allocsCheckEnv) != "" {
		b.Skip("go-redis's connections and the daemon's put workers allocate in the timed region, by the network's pace; not a per-op cost of kvalloc's code")
	}
	for _, sz := range l2Sizes {
		for _, masters := range l2Masters {
			b.Run(fmt.Sprintf("path=daemon/size=%s/masters=%d", sz.name, masters), func(b *testing.B) {
				url := storeURL(b, masters)
				prefix := fmt.Sprintf("bench-put-%s-%d:", sz.name, masters)
				keys := l2BenchKeys("put-"+sz.name, sz.keys)
				var puts []func() time.Duration
				for i, p := range l2Daemons {
					d := startPathDaemon(b, url, 4*int64(sz.keys)*sz.size, fmt.Sprintf("%s%d:", prefix, i), p.piece, p.codec)
					puts = append(puts, d.putOp(b, keys, sz.size))
				}
				rd, err := l2.NewRedis(context.Background(), url, l2.RedisOptions{Timeout: 10 * time.Second})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rd.Close() })
				c := rd.Client()
				ctx := context.Background()
				// Each object's pieces, as the daemon's would be.
				perObj := l2.PieceCount(sz.size, l2.DefaultPieceSize)
				names := pieceNames(prefix+"floor:", keys, sz.size)
				vals := make([][]byte, len(names))
				for i := range keys {
					for j := range perObj {
						off := int64(j) * l2.DefaultPieceSize
						end := min(off+l2.DefaultPieceSize, sz.size)
						p := make([]byte, end-off)
						h, err := l2.Unauthenticated.AppendPieceHeader(nil, &keys[i], sz.size, l2.DefaultPieceSize, j, 1, p)
						if err != nil {
							b.Fatal(err)
						}
						vals[i*perObj+j] = append(h, p...)
					}
				}
				sem := make(chan struct{}, l2PutWorkers)
				errs := make([]error, (len(keys)+l2PutBatch-1)/l2PutBatch)
				plain := func() time.Duration {
					t0 := time.Now()
					var wg sync.WaitGroup
					for lo := 0; lo < len(keys); lo += l2PutBatch {
						hi := min(lo+l2PutBatch, len(keys))
						sem <- struct{}{}
						wg.Add(1)
						go func() {
							defer func() { <-sem; wg.Done() }()
							_, errs[lo/l2PutBatch] = c.Pipelined(ctx, func(p redis.Pipeliner) error {
								for i := lo * perObj; i < hi*perObj; i++ {
									p.Set(ctx, names[i], vals[i], 0)
								}
								return nil
							})
						}()
					}
					wg.Wait()
					if err := errors.Join(errs...); err != nil {
						b.Fatalf("pipelined SET: %v", err)
					}
					return time.Since(t0)
				}
				alternate(b, int64(sz.keys)*sz.size, l2Paths, []func() time.Duration{puts[0], plain, puts[1], puts[2]})
			})
		}
	}
}

// putOp is one put op through d: keys reserved and stamped (untimed),
// then finished and waited for until stored in L2 (timed), then deleted
// from L1 (untimed).
func (d *l2Daemon) putOp(b *testing.B, keys []l1.ObjectKey, size int64) func() time.Duration {
	done := uint64(0)
	return func() time.Duration {
		leases := d.stamp(b, keys, size)
		t0 := time.Now()
		d.finish(b, keys, leases)
		done += uint64(len(keys))
		d.waitPuts(b, done)
		took := time.Since(t0)
		d.waitReleased(b)
		daemonAll(b, "Delete")(d.c.Delete(keys, false))
		return took
	}
}

// waitReleased waits (untimed) until d's put workers hold no read lock:
// in pieces a worker releases its objects' locks after the tier's
// PutPayloads returns, which is when waitPuts sees them stored, so a
// Delete right then could find a key still locked (KEY_IS_LOCKED).
func (d *l2Daemon) waitReleased(b *testing.B) {
	b.Helper()
	for deadline := time.Now().Add(time.Minute); d.s.L2Work().Reads > 0; {
		if time.Now().After(deadline) {
			b.Fatalf("the put workers still hold %d read locks a minute after their puts", d.s.L2Work().Reads)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
