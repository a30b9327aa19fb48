package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node is one redis-server process on a loopback port, with its own
// directory (config, log, cluster state).
type Node struct {
	// Port is the client port; a cluster node's bus is Port+10000.
	Port int
	// Dir holds the node's redis.conf, redis.log and nodes.conf.
	Dir string

	server  string
	cluster bool

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	stopped bool
}

// nodeConfig is what a node's redis.conf says beyond its port and dir.
type nodeConfig struct {
	cluster      bool
	nodeTimeout  time.Duration
	maxMemory    string
	fullCoverage bool
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

// PID is the running process's id, or 0.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil || n.isExited() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive (stopped counts as alive).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.isExited()
}

func (n *Node) isExited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// Client returns a plain client of this node alone (close it).
func (n *Node) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr(), DialTimeout: time.Second,
		ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, MaxRetries: -1})
}

// startNode picks free ports and starts a node in a new directory under
// parent, retrying on another port when the chosen one is taken first.
func startNode(ctx context.Context, server, parent string, i int, cfg nodeConfig) (*Node, error) {
	var last error
	for range 8 {
		port, err := freePort(cfg.cluster)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(parent, fmt.Sprintf("node%d-%d", i, port))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		n := &Node{Port: port, Dir: dir, server: server, cluster: cfg.cluster}
		if err := n.writeConfig(cfg); err != nil {
			return nil, err
		}
		if last = n.start(ctx); last == nil {
			return n, nil
		}
		_ = os.RemoveAll(dir)
	}
	return nil, fmt.Errorf("rediscluster: node %d did not start: %w", i, last)
}

func (n *Node) writeConfig(cfg nodeConfig) error {
	lines := []string{
		"bind 127.0.0.1",
		"port " + strconv.Itoa(n.Port),
		"dir " + n.Dir,
		"logfile " + filepath.Join(n.Dir, "redis.log"),
		"daemonize no",
		"protected-mode no",
		`save ""`,
		"appendonly no",
		// Big values: the default 512 MB proto-max-bulk-len is fine; the
		// client output buffer must not cut replicas off under load.
		"client-output-buffer-limit replica 0 0 0",
	}
	if cfg.cluster {
		lines = append(lines,
			"cluster-enabled yes",
			"cluster-config-file "+filepath.Join(n.Dir, "nodes.conf"),
			"cluster-node-timeout "+strconv.FormatInt(cfg.nodeTimeout.Milliseconds(), 10),
		)
		if !cfg.fullCoverage {
			lines = append(lines, "cluster-require-full-coverage no")
		}
	}
	if cfg.maxMemory != "" {
		lines = append(lines, "maxmemory "+cfg.maxMemory, "maxmemory-policy allkeys-lru")
	}
	return os.WriteFile(filepath.Join(n.Dir, "redis.conf"), []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// start runs the process and waits until it answers PING.
func (n *Node) start(ctx context.Context) error {
	cmd := exec.Command(n.server, filepath.Join(n.Dir, "redis.conf"))
	cmd.Dir = n.Dir
	// SIGKILL when the test binary dies, however it dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rediscluster: start %s: %w", n.server, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited, n.stopped = cmd, exited, false
	n.mu.Unlock()

	c := n.Client()
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("rediscluster: redis-server on port %d exited at start: %s", n.Port, n.logTail())
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = n.Kill()
			return fmt.Errorf("rediscluster: redis-server on port %d never answered PING: %v; %s", n.Port, err, n.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logTail is the end of the node's log, for errors.
func (n *Node) logTail() string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "redis.log"))
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return "log: " + strings.TrimSpace(string(b))
}

// Kill sends SIGKILL and waits for the process to go. Killing a node that
// is not running does nothing.
func (n *Node) Kill() error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-exited
	return nil
}

// Stop sends SIGSTOP: the process hangs, its sockets open, until Cont.
func (n *Node) Stop() error { return n.signal(syscall.SIGSTOP, true) }

// Cont sends SIGCONT to a stopped node.
func (n *Node) Cont() error { return n.signal(syscall.SIGCONT, false) }

func (n *Node) signal(sig syscall.Signal, stopped bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.isExited() {
		return fmt.Errorf("rediscluster: node on port %d is not running", n.Port)
	}
	n.stopped = stopped
	return n.cmd.Process.Signal(sig)
}

// Restart starts a killed node again on its port and directory; a
// cluster node comes back with its nodes.conf (as a replica, when the
// cluster failed it over meanwhile).
func (n *Node) Restart(ctx context.Context) error {
	if n.Running() {
		return fmt.Errorf("rediscluster: node on port %d is running", n.Port)
	}
	return n.start(ctx)
}

// freePort returns a loopback port that is free now, and, for a cluster
// node, whose bus port (port+10000) is free too.
func freePort(cluster bool) (int, error) {
	for range 200 {
		port := 20000 + rand.IntN(30000)
		if !portFree(port) || (cluster && !portFree(port+10000)) {
			continue
		}
		return port, nil
	}
	return 0, errors.New("rediscluster: no free loopback port found")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}
