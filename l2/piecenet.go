package l2

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// pieceNet is the piece path's transport: connections of its own to each
// master (RESPReader reads the replies), routed by the cluster's slot
// map, which go-redis provides (CLUSTER SLOTS). A batch runs one
// connection per master at once, each a pipeline: every command written
// at once (a SET's header apart from its payload, in one writev), then
// the replies read in order, each GET's bulk handed to its reader as it
// arrives.
type pieceNet struct {
	c       redis.UniversalClient
	auth    pieceAuth
	timeout time.Duration
	conns   int   // connections per master at most
	maxBulk int64 // the longest reply a GET accepts

	// slots is the slot map's source (CLUSTER SLOTS; one range of every
	// slot for a plain Redis); tests replace it.
	slots func(ctx context.Context) ([]redis.ClusterSlot, error)

	mu      sync.Mutex
	route   []*respPool // by slot; nil until loaded
	pools   map[string]*respPool
	stale   bool
	loaded  time.Time     // the last load's end, good or not
	loading chan struct{} // closed when the load in flight ends; nil when none
	loadErr error         // the last load's error
}

func newPieceNet(c redis.UniversalClient, auth pieceAuth, timeout time.Duration, conns int, maxBulk int64) *pieceNet {
	n := &pieceNet{c: c, auth: auth, timeout: timeout, conns: max(conns, 1), maxBulk: maxBulk, pools: map[string]*respPool{}}
	n.slots = n.clusterSlots
	return n
}

// clusterSlots is the slot map of n's client: a cluster's CLUSTER
// SLOTS, or a plain Redis's one address for every slot.
func (n *pieceNet) clusterSlots(ctx context.Context) ([]redis.ClusterSlot, error) {
	switch c := n.c.(type) {
	case *redis.ClusterClient:
		return c.ClusterSlots(ctx).Result()
	case *redis.Client:
		return []redis.ClusterSlot{{Start: 0, End: numSlots - 1, Nodes: []redis.ClusterNode{{Addr: c.Options().Addr}}}}, nil
	}
	return nil, fmt.Errorf("l2: no piece path over a %T", n.c)
}

// pieceAuth is how the piece path's connections are secured, as the
// backend's own: TLS (a rediss:// URL; config nil is the system's roots)
// and AUTH with the URL's user and the password given.
type pieceAuth struct {
	tls      bool
	config   *tls.Config
	user, pw string
}

// dial opens a connection to addr and secures it (TLS, then AUTH).
func (a pieceAuth) dial(ctx context.Context, addr string, timeout time.Duration, maxBulk int64) (*respConn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if a.tls {
		cfg := &tls.Config{}
		if a.config != nil {
			cfg = a.config.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &respConn{c: nc, rd: NewRESPReader(nc, maxBulk)}
	if a.pw != "" {
		_ = nc.SetDeadline(time.Now().Add(timeout))
		cmd := appendCmd(nil, "AUTH", a.pw)
		if a.user != "" {
			cmd = appendCmd(nil, "AUTH", a.user, a.pw)
		}
		var r Reply
		_, err := nc.Write(cmd)
		if err == nil {
			r, err = c.rd.Next()
		}
		if err == nil && (r.Kind != '+' || r.Line != "OK") {
			err = fmt.Errorf("%w: AUTH as %q: %s", ErrAuth, a.user, r.Line)
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

// minReload is the least time between two loads of the slot map.
const minReload = 100 * time.Millisecond

// routes returns the pool of each slot's master. When there is no map
// yet it loads one and waits for it (or ctx); when the map went stale (a
// MOVED, a connection error) and the last load is minReload old, it
// starts a load in the background and returns the old map meanwhile.
// No call waits on a load but the first: the load asks a node of the
// cluster, which may be the hung one, for up to the timeout, and a call
// to a healthy master that waited for it ran out its own deadline and
// tripped that master's breaker.
func (n *pieceNet) routes(ctx context.Context) ([]*respPool, error) {
	n.mu.Lock()
	if n.route != nil && (!n.stale || time.Since(n.loaded) < minReload) {
		defer n.mu.Unlock()
		return n.route, nil
	}
	if n.loading == nil && (n.route == nil || time.Since(n.loaded) >= minReload) {
		n.loading = make(chan struct{})
		go n.load(n.loading)
	}
	if n.route != nil {
		defer n.mu.Unlock()
		return n.route, nil
	}
	wait := n.loading
	n.mu.Unlock()
	if wait != nil {
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.route == nil {
		return nil, fmt.Errorf("l2: the cluster's slot map: %w", n.loadErr)
	}
	return n.route, nil
}

// load loads the slot map, under a timeout of its own and no lock, then
// installs it (a failed load keeps the old map; a call minReload later
// tries again) and closes done.
func (n *pieceNet) load(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	slots, err := n.slots(ctx)
	cancel()
	n.mu.Lock()
	defer n.mu.Unlock()
	defer close(done)
	n.loading, n.loaded, n.loadErr = nil, time.Now(), err
	if err != nil {
		return
	}
	route := make([]*respPool, numSlots)
	for _, s := range slots {
		if len(s.Nodes) == 0 || s.Start < 0 || s.End >= numSlots || s.Start > s.End {
			continue
		}
		addr := s.Nodes[0].Addr
		p := n.pools[addr]
		if p == nil {
			p = &respPool{addr: addr, sem: make(chan struct{}, n.conns), timeout: n.timeout, auth: n.auth}
			n.pools[addr] = p
		}
		for sl := s.Start; sl <= s.End; sl++ {
			route[sl] = p
		}
	}
	n.route, n.stale = route, false
}

// reload marks the slot map stale: the next call loads it again.
func (n *pieceNet) reload() {
	n.mu.Lock()
	n.stale = true
	n.mu.Unlock()
}

// close closes every idle connection.
func (n *pieceNet) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.pools {
		p.close()
	}
}

// byMaster groups the indexes of slots by the master that serves them;
// an unserved slot's index is in none (its caller's miss).
func (n *pieceNet) byMaster(ctx context.Context, slots []int) (map[*respPool][]int, error) {
	route, err := n.routes(ctx)
	if err != nil {
		return nil, err
	}
	groups := map[*respPool][]int{}
	for i, s := range slots {
		if p := route[s]; p != nil {
			groups[p] = append(groups[p], i)
		}
	}
	return groups, nil
}

// get runs GET of names (in slots) over every master at once. For each
// name, read(i, rd, r) reads its reply r, whose bulk (r.Kind '$', r.Len
// ≥ 0) it must read through (EndBulk or SkipBulk); an error from it ends
// that connection. Every name whose reply was not read gets read(i, nil,
// Reply{}). It returns with the first error, after every read.
func (n *pieceNet) get(ctx context.Context, names []string, slots []int, read func(i int, rd *RESPReader, r Reply) error) error {
	done := make([]bool, len(names))
	defer func() {
		for i := range names {
			if !done[i] {
				read(i, nil, Reply{})
			}
		}
	}()
	groups, err := n.byMaster(ctx, slots)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for p, idx := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.do(ctx, n.maxBulk, func(c *respConn) error {
				var cmd []byte
				for _, i := range idx {
					cmd = appendCmd(cmd, "GET", names[i])
				}
				if _, err := c.c.Write(cmd); err != nil {
					return err
				}
				for _, i := range idx {
					r, err := c.rd.Next()
					if err != nil {
						return err
					}
					n.moved(r)
					done[i] = true
					if err := read(i, c.rd, r); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				n.reload()
				mu.Lock()
				first = cmp(first, fmt.Errorf("l2: %s: %w", p.addr, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// set runs SET of names (in slots) over every master at once. The value
// of name i is the buffers build(i) returns, called on the master's
// goroutine just before they are written, as they are (one writev a
// value: never copied); nil stores nothing. It returns, per name,
// whether Redis answered OK, and the first error.
func (n *pieceNet) set(ctx context.Context, names []string, slots []int, build func(i int) [][]byte) ([]bool, error) {
	ok := make([]bool, len(names))
	groups, err := n.byMaster(ctx, slots)
	if err != nil {
		return ok, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for p, idx := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.do(ctx, n.maxBulk, func(c *respConn) error {
				var head []byte
				sent := idx[:0:0]
				for _, i := range idx {
					bufs := build(i)
					if bufs == nil {
						continue
					}
					vl := 0
					for _, b := range bufs {
						vl += len(b)
					}
					head = appendSetHead(head[:0], names[i], vl)
					out := make(net.Buffers, 0, len(bufs)+2)
					out = append(out, head)
					for _, b := range bufs {
						if len(b) > 0 {
							out = append(out, b)
						}
					}
					out = append(out, crlf)
					if _, err := out.WriteTo(c.c); err != nil {
						return err
					}
					sent = append(sent, i)
				}
				for _, i := range sent {
					r, err := c.rd.Next()
					if err != nil {
						return err
					}
					n.moved(r)
					if r.Kind == '$' && r.Len >= 0 {
						if err := c.rd.SkipBulk(); err != nil {
							return err
						}
					}
					ok[i] = r.Kind == '+' && r.Line == "OK"
				}
				return nil
			})
			if err != nil {
				n.reload()
				mu.Lock()
				first = cmp(first, fmt.Errorf("l2: %s: %w", p.addr, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ok, first
}

// moved marks the slot map stale on a redirection.
func (n *pieceNet) moved(r Reply) {
	if r.Kind == '-' && (strings.HasPrefix(r.Line, "MOVED ") || strings.HasPrefix(r.Line, "ASK ")) {
		n.reload()
	}
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

var crlf = []byte("\r\n")

// appendCmd appends a RESP command of bulk strings.
func appendCmd(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, crlf...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, crlf...)
		b = append(b, a...)
		b = append(b, crlf...)
	}
	return b
}

// appendSetHead appends a SET of name up to its value's bytes: the value
// (vl bytes) and its CRLF follow.
func appendSetHead(b []byte, name string, vl int) []byte {
	b = append(b, "*3\r\n$3\r\nSET\r\n$"...)
	b = strconv.AppendInt(b, int64(len(name)), 10)
	b = append(b, crlf...)
	b = append(b, name...)
	b = append(b, "\r\n$"...)
	b = strconv.AppendInt(b, int64(vl), 10)
	return append(b, crlf...)
}

// respPool is one master's connections: at most cap(sem) at once, the
// idle ones kept.
type respPool struct {
	addr    string
	auth    pieceAuth
	timeout time.Duration
	sem     chan struct{}
	mu      sync.Mutex
	idle    []*respConn
}

type respConn struct {
	c  net.Conn
	rd *RESPReader
}

// do runs f on a connection of the pool, under ctx's deadline (and the
// pool's timeout): a connection f leaves in error is closed, another
// kept for the next call. ctx's end cuts f's reads and writes.
func (p *respPool) do(ctx context.Context, maxBulk int64, f func(c *respConn) error) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.sem }()
	p.mu.Lock()
	var c *respConn
	if k := len(p.idle); k > 0 {
		c, p.idle = p.idle[k-1], p.idle[:k-1]
	}
	p.mu.Unlock()
	if c == nil {
		var err error
		if c, err = p.auth.dial(ctx, p.addr, p.timeout, maxBulk); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(p.timeout)
	ctxDeadline := false
	if d, ok := ctx.Deadline(); ok && !d.After(deadline) {
		deadline, ctxDeadline = d, true
	}
	_ = c.c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	err := f(c)
	if cut := !stop(); cut || err != nil {
		// Cut by ctx, or in error: the connection's state is unknown.
		c.c.Close()
		var ne net.Error
		if ctxDeadline && errors.As(err, &ne) && ne.Timeout() {
			// The connection's deadline is ctx's: its timer fires at
			// the same instant, and the caller judges by ctx (a call
			// that ran out its deadline trips a master's breaker).
			<-ctx.Done()
		}
		if err != nil && ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return err
	}
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
	return nil
}

func (p *respPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.idle {
		c.c.Close()
	}
	p.idle = nil
}
