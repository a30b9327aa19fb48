//go:build linux

package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
)

// CallTimeout is every client call's deadline: long, since the machine
// may be loaded; a replay never waits on a lock.
const CallTimeout = time.Minute

// daemon is one kvallocd, the real socket server of package server run
// in this process, and the slots of its pool.
type daemon struct {
	srv   *server.Server
	slots int64
	done  chan error
}

// startDaemon runs a daemon on socket path with a pool of slots blocks of
// unit bytes (a memfd, not populated: backed only where written) and
// manager configuration cfg.
func startDaemon(path string, slots, unit int64, cfg l1.Config) (*daemon, error) {
	srv, err := server.New(server.Config{SocketPath: path, PoolSize: slots * unit, L1: cfg})
	if err != nil {
		return nil, err
	}
	d := &daemon{srv: srv, slots: slots, done: make(chan error, 1)}
	go func() { d.done <- srv.Serve() }()
	return d, nil
}

// close stops the daemon and returns Serve's error or Close's.
func (d *daemon) close() error {
	err := d.srv.Close()
	return errors.Join(err, <-d.done)
}

// node is the daemons of one configuration and the engines' clients.
type node struct {
	dir     string
	daemons []*daemon
	clients []*client.Client
	// pool[e] is the daemon that client e is connected to.
	pool []int
}

// startNode starts one daemon per entry of slots, on sockets in a
// temporary directory, and connects clients engines, client e to daemon
// e × len(slots) / engines (all to the one daemon of a shared pool, one
// each to private pools).
func startNode(slots []int64, unit int64, cfg l1.Config, engines int) (n *node, err error) {
	dir, err := os.MkdirTemp("", "nodebench")
	if err != nil {
		return nil, err
	}
	n = &node{dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.close())
			n = nil
		}
	}()
	for i, s := range slots {
		d, err := startDaemon(filepath.Join(dir, fmt.Sprintf("kvallocd-%d.sock", i)), s, unit, cfg)
		if err != nil {
			return n, err
		}
		n.daemons = append(n.daemons, d)
	}
	for e := range engines {
		p := e * len(slots) / engines
		c, err := client.Dial(n.daemons[p].srv.SocketPath(), client.Options{Timeout: CallTimeout})
		if err != nil {
			return n, err
		}
		n.clients = append(n.clients, c)
		n.pool = append(n.pool, p)
	}
	return n, nil
}

// probes returns, for each daemon, the first client connected to it.
func (n *node) probes() []*client.Client {
	out := make([]*client.Client, len(n.daemons))
	for e := len(n.clients) - 1; e >= 0; e-- {
		out[n.pool[e]] = n.clients[e]
	}
	return out
}

// close closes the clients, then the daemons, then removes the sockets'
// directory.
func (n *node) close() error {
	var errs []error
	for _, c := range n.clients {
		errs = append(errs, c.Close())
	}
	for _, d := range n.daemons {
		errs = append(errs, d.close())
	}
	errs = append(errs, os.RemoveAll(n.dir))
	return errors.Join(errs...)
}
