package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options shapes a cluster or a plain server. The zero value is a cluster
// of 3 masters with 1 replica each.
type Options struct {
	// Masters is the number of masters (default 3; a cluster needs 3).
	Masters int
	// Replicas is the number of replicas per master (default 1; -1 for none).
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a master may be
	// unreachable before its replica takes over (default 1 s).
	NodeTimeout time.Duration
	// MaxMemory, when set (e.g. "256mb"), caps each node with the
	// allkeys-lru policy: Redis evicts on its own.
	MaxMemory string
	// FullCoverage runs the nodes with Redis's default
	// cluster-require-full-coverage yes: once a master is flagged failed
	// and until its replica takes over, every node refuses every key
	// (CLUSTERDOWN), the live masters' too. Without it the nodes run as
	// docs/OPERATING.md has an L2 cluster run: with
	// cluster-require-full-coverage no, the live masters serve their
	// slots.
	FullCoverage bool
	// Dir is the parent of the nodes' directories; default a new temporary
	// directory, removed by Close.
	Dir string
	// ReadyTimeout bounds Start's wait for the cluster (default 60 s).
	ReadyTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Masters == 0 {
		o.Masters = 3
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Replicas < 0 {
		o.Replicas = 0
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = time.Second
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
}

// Cluster is a running Redis Cluster.
type Cluster struct {
	// Nodes are every node, the first Masters of them the masters as
	// created (a failover changes roles: see Masters).
	Nodes []*Node

	opts    Options
	dir     string
	ownsDir bool
}

// Start creates a cluster: it starts Masters×(1+Replicas) redis-server
// processes with cluster-enabled yes, joins them with `redis-cli --cluster
// create`, and waits until every node reports cluster_state:ok, all 16384
// slots are covered and every replica's link to its master is up. On any
// failure it kills what it started and returns the error.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts.defaults()
	server, cli, err := binaries()
	if err != nil {
		return nil, err
	}
	if opts.Masters < 3 {
		return nil, fmt.Errorf("rediscluster: a cluster needs at least 3 masters, not %d", opts.Masters)
	}
	c = &Cluster{opts: opts, dir: opts.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "rediscluster-"); err != nil {
			return nil, err
		}
		c.ownsDir = true
	}
	defer func() {
		if err != nil {
			c.Close()
			c = nil
		}
	}()
	cfg := nodeConfig{cluster: true, nodeTimeout: opts.NodeTimeout, maxMemory: opts.MaxMemory, fullCoverage: opts.FullCoverage}
	for i := range opts.Masters * (1 + opts.Replicas) {
		n, err := startNode(ctx, server, c.dir, i, cfg)
		if err != nil {
			return c, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", fmt.Sprint(opts.Replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, opts.ReadyTimeout)
	defer cancel()
	if out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput(); err != nil {
		return c, fmt.Errorf("rediscluster: redis-cli --cluster create: %v: %s", err, tail(out))
	}
	if err := c.WaitReplicated(cctx); err != nil {
		return c, err
	}
	return c, nil
}

// Seeds are every node's address: the client's seed list.
func (c *Cluster) Seeds() []string {
	var s []string
	for _, n := range c.Nodes {
		s = append(s, n.Addr())
	}
	return s
}

// URL is the seeds as kvallocd's -l2 flag takes them:
// redis://host:port,host:port,...
func (c *Cluster) URL() string { return "redis://" + strings.Join(c.Seeds(), ",") }

// Client returns a cluster client on the seeds (close it).
func (c *Cluster) Client() *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Seeds(), DialTimeout: time.Second,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
}

// WaitReady waits until every running, not stopped node reports
// cluster_state:ok with all slots assigned and ok: the cluster serves
// every key (after a failover, a promoted master may have no replica).
func (c *Cluster) WaitReady(ctx context.Context) error { return c.wait(ctx, 0) }

// WaitReplicated waits for what WaitReady does and, besides, every
// master serving slots to have Replicas connected replicas, each with its
// link to its master up: the cluster as Start leaves it.
func (c *Cluster) WaitReplicated(ctx context.Context) error { return c.wait(ctx, c.opts.Replicas) }

func (c *Cluster) wait(ctx context.Context, replicas int) error {
	var why error
	for {
		if why = c.ready(ctx, replicas); why == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rediscluster: cluster not ready: %w (%v)", why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) ready(ctx context.Context, replicas int) error {
	live := 0
	for _, n := range c.Nodes {
		n.mu.Lock()
		up := n.cmd != nil && !n.isExited() && !n.stopped
		n.mu.Unlock()
		if !up {
			continue
		}
		live++
		if err := nodeReady(ctx, n, replicas); err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
	}
	if live == 0 {
		return errors.New("no node is running")
	}
	return nil
}

func nodeReady(ctx context.Context, n *Node, replicas int) error {
	cl := n.Client()
	defer cl.Close()
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, err := cl.ClusterInfo(qctx).Result()
	if err != nil {
		return err
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_slots_ok:16384"} {
		if !strings.Contains(info, want) {
			return fmt.Errorf("CLUSTER INFO lacks %s", want)
		}
	}
	nodes, err := cl.ClusterNodes(qctx).Result()
	if err != nil {
		return err
	}
	roles, err := parseNodes(nodes)
	if err != nil {
		return err
	}
	for id, m := range roles.masters {
		if m.slots && m.connected && roles.replicas[id] < replicas {
			return fmt.Errorf("master %s has %d connected replicas, want %d", m.addr, roles.replicas[id], replicas)
		}
	}
	repl, err := cl.Info(qctx, "replication").Result()
	if err != nil {
		return err
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return errors.New("replica's link to its master is down")
	}
	return nil
}

// nodeRoles is one node's view of CLUSTER NODES.
type nodeRoles struct {
	masters  map[string]master // by node id
	replicas map[string]int    // connected replicas per master id
}

type master struct {
	addr      string
	slots     bool
	connected bool
}

// parseNodes reads CLUSTER NODES: id addr flags master ping pong epoch
// link slots...
func parseNodes(s string) (nodeRoles, error) {
	r := nodeRoles{masters: map[string]master{}, replicas: map[string]int{}}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return r, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		addr := f[1]
		if i := strings.IndexByte(addr, '@'); i >= 0 {
			addr = addr[:i]
		}
		flags := f[2]
		ok := f[7] == "connected" && !strings.Contains(flags, "fail")
		switch {
		case strings.Contains(flags, "master"):
			r.masters[f[0]] = master{addr: addr, slots: len(f) > 8, connected: ok}
		case strings.Contains(flags, "slave") && ok:
			r.replicas[f[3]]++
		}
	}
	return r, nil
}

// Masters returns the nodes that serve slots now, as node 0 (or the first
// live node that answers) sees the cluster.
func (c *Cluster) Masters(ctx context.Context) ([]*Node, error) {
	var last error
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		cl := n.Client()
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		s, err := cl.ClusterNodes(qctx).Result()
		cancel()
		cl.Close()
		if err != nil {
			last = err
			continue
		}
		roles, err := parseNodes(s)
		if err != nil {
			return nil, err
		}
		var out []*Node
		for _, m := range roles.masters {
			if !m.slots || !m.connected {
				continue
			}
			for _, x := range c.Nodes {
				if x.Addr() == m.addr {
					out = append(out, x)
				}
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("rediscluster: no node answered CLUSTER NODES: %v", last)
}

// Close kills every node, waits for each, and removes the directory Start
// made.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		_ = n.Kill()
	}
	if c.ownsDir {
		_ = os.RemoveAll(c.dir)
	}
}

// StartServer starts one plain redis-server (no cluster) in a new
// directory under dir ("" for a temporary one, removed by Close).
func StartServer(ctx context.Context, opts Options) (*Server, error) {
	server, _, err := binaries()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: opts.Dir}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "redisserver-"); err != nil {
			return nil, err
		}
		s.ownsDir = true
	}
	n, err := startNode(ctx, server, s.dir, 0, nodeConfig{maxMemory: opts.MaxMemory})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.Node = n
	return s, nil
}

// Server is one plain redis-server.
type Server struct {
	*Node
	dir     string
	ownsDir bool
}

// URL is the server as kvallocd's -l2 flag takes it: redis://host:port.
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Close kills the server and removes the directory StartServer made.
func (s *Server) Close() {
	if s.Node != nil {
		_ = s.Kill()
	}
	if s.ownsDir {
		_ = os.RemoveAll(s.dir)
	}
}

func tail(b []byte) string {
	if len(b) > 800 {
		b = b[len(b)-800:]
	}
	return strings.TrimSpace(string(b))
}
