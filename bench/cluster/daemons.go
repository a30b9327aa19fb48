//go:build linux

package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvalloc/kvalloc/bench/node"
	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// ErrDaemonL2 is the answer of RunDaemons to an L2 write policy kvallocd
// does not have: it writes through at finish, and nothing else.
var ErrDaemonL2 = errors.New("cluster: kvallocd's L2 tier writes through at finish only")

// DaemonBlockSize is the bytes per block of the daemons' replay: every
// byte of a block is written and every byte of a hit checked, so the
// blocks are small (a node's l1 of the Mooncake trace, 5 % of its blocks,
// is then 143 MiB of memfd).
const DaemonBlockSize = 16 << 10

// DaemonPolicy is the daemons' l1 policy: plain LRU evicting on demand,
// the closest of l1's policies to the model's ideal LRU.
const DaemonPolicy = "on-demand/scattered"

// DaemonWait is the prefix read's wait for the daemon's prefetch.
const DaemonWait = time.Second

// RunDaemons replays tr through real kvallocd daemons, one per node, each
// the socket server of package server (as cmd/kvallocd runs it) on its
// own memfd pool of cfg.L1 blocks and its own Unix socket, with one
// client per node driven from this goroutine in the replay's order. A
// request's lookup is the client's Lookup with prefetch, then
// ReserveReadPrefixWait (the read path an engine takes); its store
// ReserveWriteChain in ModeNew, writing every byte of each granted block
// (a pattern of the block's number, checked on every hit); its finish
// FinishWrite and FinishRead. At the end every daemon must hold no lock
// and pass server.Check. cfg.Options.BlockSize 0 means DaemonBlockSize.
func RunDaemons(tr *trace.Trace, cfg Config) (_ *Result, err error) {
	if cfg.L2 > 0 && cfg.Write != WriteThrough {
		return nil, fmt.Errorf("%w, not %s", ErrDaemonL2, cfg.Write)
	}
	if cfg.Nodes < 1 || cfg.Nodes > 256 || cfg.L1 < 1 || cfg.Routing.Assign == nil {
		return nil, fmt.Errorf("%w: %d nodes of %d blocks", ErrConfig, cfg.Nodes, cfg.L1)
	}
	ps, err := trace.SelectPolicies(DaemonPolicy)
	if err != nil {
		return nil, err
	}
	o := cfg.Options
	if o.BlockSize == 0 {
		o.BlockSize = DaemonBlockSize
	}
	if o.BlockSize < 8 || o.BlockSize%8 != 0 {
		return nil, fmt.Errorf("%w: block size %d: a multiple of 8 bytes", ErrConfig, o.BlockSize)
	}
	o.Slots = int64(cfg.Nodes) * cfg.L1
	reqs := tr.Requests
	if o.MaxRequests > 0 && o.MaxRequests < len(reqs) {
		reqs = reqs[:o.MaxRequests]
	}
	at, err := cfg.Routing.Assign(reqs, cfg.Nodes)
	if err != nil {
		return nil, err
	}
	var clock sim.Clock
	dir, err := os.MkdirTemp("", "clusterbench")
	if err != nil {
		return nil, err
	}
	d := &daemonDriver{cfg: &cfg, at: at, size: o.BlockSize, flights: map[int]*daemonFlight{},
		res: &Result{Config: cfg, BlockBytes: o.BlockSize, Load: make([]int, cfg.Nodes)}}
	var rl2 *redisL2
	ctx := context.Background()
	if cfg.L2 > 0 {
		if rl2, err = startRedisL2(ctx, cfg.L2, o.BlockSize); err != nil {
			return nil, err
		}
	}
	defer func() {
		err = errors.Join(err, d.close(), os.RemoveAll(dir))
		if rl2 != nil {
			if err == nil {
				var kerr error
				d.res.L2Keys, kerr = rl2.keys(ctx)
				err = kerr
			}
			rl2.close()
		}
	}()
	for k := range cfg.Nodes {
		sc := server.Config{SocketPath: filepath.Join(dir, fmt.Sprintf("node-%d.sock", k)),
			PoolSize: cfg.L1 * o.Unit(), L1: ps[0].Config(l1.Config{Now: clock.Time})}

		var store *countingStore
		if rl2 != nil {
			if store, err = rl2.tier(ctx); err != nil {
				return nil, err
			}
			sc.L2 = server.L2Config{Store: store}

		}
		srv, err := server.New(sc)
		if err != nil {
			if store != nil {
				store.Close()
			}
			return nil, err
		}
		dn := &daemonNode{srv: srv, done: make(chan error, 1), store: store}
		go func() { dn.done <- srv.Serve() }()
		d.nodes = append(d.nodes, dn)
		if dn.c, err = client.Dial(srv.SocketPath(), client.Options{Timeout: node.CallTimeout}); err != nil {
			return nil, err
		}
	}
	tres, err := trace.RunDriver(tr, cfg.Name()+" (daemons)", d, o, &clock)
	if err != nil {
		return nil, err
	}
	d.res.Result = *tres
	return d.res, nil
}

// daemonNode is one node's daemon and its client.
type daemonNode struct {
	srv  *server.Server
	done chan error
	c    *client.Client
	// store is the node's L2 tier (nil without L2), and finished the
	// blocks its daemon finished, each queued for a copy to L2.
	store    *countingStore
	finished int64
}

// daemonDriver is the cluster through daemons as a trace.Driver.
type daemonDriver struct {
	cfg     *Config
	at      []uint8
	size    int64
	nodes   []*daemonNode
	flights map[int]*daemonFlight
	kbuf    []l1.ObjectKey
	res     *Result
	// Splits counts lookups whose L1 count was not the prefix then read
	// (0 with one driver and no L2).
	splits int64
}

type daemonFlight struct {
	n       *daemonNode
	c       *client.Client
	hits    int
	reads   []client.Lease
	granted []int32
	writes  []client.Lease
}

func (d *daemonDriver) keys(blocks []int32) []l1.ObjectKey {
	d.kbuf = d.kbuf[:0]
	for _, b := range blocks {
		d.kbuf = append(d.kbuf, node.Key(b, 0))
	}
	return d.kbuf
}

// pattern fills obj with block b's pattern: every 8-byte word is b's
// number mixed with the word's place, so a byte of another block, or of
// another place, differs.
func pattern(obj []byte, b int32) {
	for w := 0; w+8 <= len(obj); w += 8 {
		binary.LittleEndian.PutUint64(obj[w:], splitWord(b, w))
	}
}

func splitWord(b int32, w int) uint64 {
	x := uint64(uint32(b))<<32 | uint64(w)
	x ^= x >> 31
	x *= 0x7fb5d329728ea185
	return x ^ x>>27
}

// whose says what a block that failed its check holds: zeros, or the
// pattern of which block (searched among the first 1<<22 block numbers).
func whose(obj []byte) string {
	if len(obj) < 8 {
		return "too short"
	}
	w := binary.LittleEndian.Uint64(obj)
	if w == 0 {
		return "zeros at byte 0"
	}
	for b := range int32(1 << 22) {
		if splitWord(b, 0) == w {
			return fmt.Sprintf("block %d's first word", b)
		}
	}
	return "no block's pattern"
}

// checkPattern returns the offset of the first word of obj that is not
// block b's, or -1.
func checkPattern(obj []byte, b int32) int {
	for w := 0; w+8 <= len(obj); w += 8 {
		if binary.LittleEndian.Uint64(obj[w:]) != splitWord(b, w) {
			return w
		}
	}
	return -1
}

// Lookup implements trace.Driver.
func (d *daemonDriver) Lookup(i int, r *trace.Request) (int, error) {
	n := int(d.at[i])
	if n >= len(d.nodes) {
		return 0, fmt.Errorf("cluster: request %d routed to node %d of %d", i, n, len(d.nodes))
	}
	d.res.Load[n]++
	c := d.nodes[n].c
	keys := d.keys(r.Blocks)
	lk, err := c.Lookup(keys, true)
	if err != nil {
		return 0, err
	}
	res, h, err := c.ReserveReadPrefixWait(keys, 1, DaemonWait)
	if err != nil {
		return 0, err
	}
	f := &daemonFlight{n: d.nodes[n], c: c, hits: h}
	if h < 0 || h > len(res) || h > len(r.Blocks) {
		return 0, fmt.Errorf("cluster: node %d answered a prefix of %d for %d keys", n, h, len(r.Blocks))
	}
	for j, x := range res[:h] {
		if x.Status != wire.StatusOK {
			return 0, fmt.Errorf("cluster: node %d answered a prefix of %d keys whose key %d (block %d) is %v, not OK (lookup %+v)", n, h, j, r.Blocks[j], x.Status, lk)
		}
		obj, err := c.Bytes(x.Block)
		if err != nil {
			return 0, err
		}
		if w := checkPattern(obj, r.Blocks[j]); w >= 0 {
			src := "from its l1"
			if j >= int(lk.L1) {
				src = "past the lookup's L1 count"
			}
			extra := ""
			if d.nodes[n].store != nil {
				vals := d.nodes[n].store.Tier.Get(context.Background(), []l1.ObjectKey{node.Key(r.Blocks[j], 0)})
				if vals[0] == nil {
					extra = "; L2 has no value for it now"
				} else {
					extra = fmt.Sprintf("; L2's value for it now holds %s (check %d)", whose(vals[0]), checkPattern(vals[0], r.Blocks[j]))
				}
			}
			if pool, _ := d.nodes[n].srv.Pool(); int64(len(pool)) >= x.Block.Offset+x.Block.Size {
				extra += fmt.Sprintf("; the daemon's own mapping there holds %s", whose(pool[x.Block.Offset:x.Block.Offset+x.Block.Size]))
			}
			for _, e := range d.nodes[n].srv.Manager().Snapshot() {
				if e.Block.Offset == x.Block.Offset && e.Key != node.Key(r.Blocks[j], 0) {
					extra += fmt.Sprintf("; the daemon's l1 also has %x at that block (finished %v, write-locked %v)", e.Key.ChunkHash, e.Finished, e.WriteLocked)
				}
			}
			return 0, fmt.Errorf("cluster: node %d read block %d at offset %d (%s; hit %d of %d, lookup %+v) with a wrong word at byte %d: %s%s",
				n, r.Blocks[j], x.Block.Offset, src, j, h, lk, w, whose(obj), extra)
		}
		f.reads = append(f.reads, x.Lease)
	}
	l1h := min(int(lk.L1), h)
	if int(lk.L1) != h && lk.L2 == 0 {
		d.splits++
	}
	d.res.L1Hits += int64(l1h)
	d.res.L2Hits += int64(h - l1h)
	d.flights[i] = f
	return h, nil
}

// Store implements trace.Driver.
func (d *daemonDriver) Store(i int, r *trace.Request, hits int) error {
	f := d.flights[i]
	tail := r.Blocks[hits:]
	if len(tail) == 0 {
		return nil
	}
	res, err := f.c.ReserveWriteChain(d.keys(tail), nil, nil, d.size, l1.ModeNew)
	if err != nil {
		return err
	}
	var ok, oom int64
	for j, x := range res {
		switch x.Status {
		case wire.StatusOK:
			obj, err := f.c.Bytes(x.Block)
			if err != nil {
				return err
			}
			pattern(obj, tail[j])
			f.granted = append(f.granted, tail[j])
			f.writes = append(f.writes, x.Lease)
			ok++
		case wire.StatusOutOfMemory:
			oom++
		}
	}
	d.res.Grants.Add(ok, oom, d.size, 0)
	return nil
}

// Finish implements trace.Driver.
func (d *daemonDriver) Finish(i int, r *trace.Request, hits int) ([]int32, error) {
	f := d.flights[i]
	delete(d.flights, i)
	var stored []int32
	if len(f.granted) > 0 {
		sts, err := f.c.FinishWrite(d.keys(f.granted), f.writes)
		if err != nil {
			return nil, err
		}
		for j, s := range sts {
			if s != wire.StatusOK {
				d.res.Lost++
				continue
			}
			stored = append(stored, f.granted[j])
		}
		if f.n.store != nil {
			f.n.finished += int64(len(stored))
			d.settle(f.n)
		}
	}
	if f.hits > 0 {
		sts, err := f.c.FinishRead(d.keys(r.Blocks[:f.hits]), f.reads, 1)
		if err != nil {
			return nil, err
		}
		for _, s := range sts {
			if s != wire.StatusOK {
				d.res.Lost++
			}
		}
	}
	return stored, nil
}

// settle waits, up to SettleTimeout, until node n's daemon has handed every
// block it finished to its L2 tier (sent or dropped): the model's
// write-through is instantaneous. A copy the daemon skipped (its block
// gone before the copy) is never handed over; the wait then times out and
// is counted.
func (d *daemonDriver) settle(n *daemonNode) {
	deadline := time.Now().Add(SettleTimeout)
	for n.store.done.Load() < n.finished {
		if time.Now().After(deadline) {
			d.res.Unsettled++
			n.finished = n.store.done.Load()
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Close implements trace.Driver: nothing locked, every daemon consistent.
func (d *daemonDriver) Close(res *trace.Result) error {
	var errs []error
	if d.splits > 0 {
		errs = append(errs, fmt.Errorf("cluster: %d lookups counted an L1 prefix other than the one then read", d.splits))
	}
	for k, dn := range d.nodes {
		st, err := dn.c.Stats()
		if err != nil {
			return err
		}
		res.Evictions += st.Evictions
		for _, e := range dn.srv.Manager().Snapshot() {
			if e.WriteLocked || e.ReadLocks > 0 {
				errs = append(errs, fmt.Errorf("cluster: daemon %d: %v still locked after the replay", k, e.Key))
				break
			}
		}
		if err := dn.srv.Check(); err != nil {
			errs = append(errs, fmt.Errorf("cluster: daemon %d: %w", k, err))
		}
		if dn.store != nil {
			ls := dn.store.Stats()
			d.res.Puts += int64(ls.Puts)
			d.res.Drops += int64(ls.Drops)
			if ls.Corrupt > 0 {
				errs = append(errs, fmt.Errorf("cluster: daemon %d met %d corrupt L2 values", k, ls.Corrupt))
			}
		}
	}

	res.Lost, res.Grants = d.res.Lost, d.res.Grants
	if res.Lost > 0 {
		errs = append(errs, fmt.Errorf("cluster: %d finishing calls answered other than OK", res.Lost))
	}
	d.res.Places = int64(len(d.nodes))*d.cfg.L1 + d.cfg.L2
	return errors.Join(errs...)
}

// close closes the clients, then the daemons.
func (d *daemonDriver) close() error {
	var errs []error
	for _, dn := range d.nodes {
		if dn.c != nil {
			errs = append(errs, dn.c.Close())
		}
	}
	for _, dn := range d.nodes {
		errs = append(errs, dn.srv.Close(), <-dn.done)
	}
	return errors.Join(errs...)
}
