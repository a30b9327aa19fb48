//go:build linux

package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kvalloc/kvalloc/metrics"
)

// Collector returns the daemon's metrics: the allocator's, the pool's and
// the manager's (package metrics), and the daemon's own (with
// DebugVerify, also kvalloc_daemon_verify_total, _verify_failures_total,
// _oom_calls_total, _oom_evictable_calls_total and
// _oom_evictable_keys_total: see debug.go); /metrics adds the Go
// runtime's (go_memstats_*, go_goroutines, ...):
//
//	kvalloc_daemon_connections                         gauge    connections open
//	kvalloc_daemon_connections_accepted_total          counter  connections accepted
//	kvalloc_daemon_connections_closed_total            counter  connections ended and released
//	kvalloc_daemon_connections_refused_total           counter  peers the allowlist refused
//	kvalloc_daemon_released_writes_total               counter  writes aborted because their connection ended
//	kvalloc_daemon_released_read_locks_total           counter  read locks released because their connection ended
//	kvalloc_daemon_released_bytes_total                counter  bytes those releases freed
//	kvalloc_daemon_connections_over_cap_total          counter  connections refused TOO_MANY_CONNECTIONS at a cap
//	kvalloc_daemon_connections_out_of_fds_total        counter  connections refused TOO_MANY_CONNECTIONS for want of descriptors
//	kvalloc_daemon_hello_timeouts_total                counter  connections closed for saying no hello within the hello timeout
//	kvalloc_daemon_busy_total                          counter  requests dropped and answered BUSY: no frame buffers within the frame timeout
//	kvalloc_daemon_frame_buffer_bytes                  gauge    bytes of the shared frame buffers, lent and kept for reuse
//	kvalloc_daemon_frame_buffer_kept_bytes             gauge    of them, kept for reuse
//	kvalloc_daemon_frame_buffer_peak_bytes             gauge    the most frame_buffer_bytes has been
//	kvalloc_daemon_frame_buffer_budget_bytes           gauge    the bound on frame_buffer_bytes (-buffer-budget)
//	kvalloc_daemon_connection_buffer_bytes             gauge    bytes the open connections keep between requests: own buffers and scratch
//	kvalloc_daemon_log_write_errors_total              counter  log records the log's writer failed to take (a closed stderr)
//	kvalloc_daemon_log_suppressed_total                counter  log records dropped by the rate limit of repeated messages
//	kvalloc_daemon_over_limit_keys_total               counter  keys cut by a per-connection limit (-conn-read-locks, -conn-write-bytes): OVER_LIMIT, or SKIPPED after it in a prefix
//	kvalloc_daemon_connection_write_reservations{conn,pid,uid}  gauge  write reservations each connection holds
//	kvalloc_daemon_connection_read_locks{conn,pid,uid}          gauge  read locks each connection holds
//	kvalloc_daemon_connection_age_seconds{conn,pid,uid}         gauge  time since each connection was accepted
func (s *Server) Collector() prometheus.Collector {
	return &collector{s: s, inner: metrics.New(metrics.Options{Allocator: s.alloc, Region: s.pool, L1: metrics.L1(s.mgr)})}
}

type collector struct {
	s     *Server
	inner *metrics.Collector
}

var (
	descConns    = prometheus.NewDesc("kvalloc_daemon_connections", "Connections open.", nil, nil)
	descAccepted = prometheus.NewDesc("kvalloc_daemon_connections_accepted_total", "Connections accepted.", nil, nil)
	descClosed   = prometheus.NewDesc("kvalloc_daemon_connections_closed_total", "Connections ended and released.", nil, nil)
	descRefused  = prometheus.NewDesc("kvalloc_daemon_connections_refused_total", "Peers the allowlist refused.", nil, nil)
	descRelW     = prometheus.NewDesc("kvalloc_daemon_released_writes_total", "Write reservations aborted because their connection ended.", nil, nil)
	descRelR     = prometheus.NewDesc("kvalloc_daemon_released_read_locks_total", "Read locks released because their connection ended.", nil, nil)
	descRelB     = prometheus.NewDesc("kvalloc_daemon_released_bytes_total", "Bytes freed by releases of ended connections.", nil, nil)
	descOverCap  = prometheus.NewDesc("kvalloc_daemon_connections_over_cap_total", "Connections refused TOO_MANY_CONNECTIONS at a cap (-max-conns, -max-conns-per-uid).", nil, nil)
	descNoFDs    = prometheus.NewDesc("kvalloc_daemon_connections_out_of_fds_total", "Connections refused TOO_MANY_CONNECTIONS for want of file descriptors.", nil, nil)
	descHelloTO  = prometheus.NewDesc("kvalloc_daemon_hello_timeouts_total", "Connections closed for saying no hello within the hello timeout.", nil, nil)
	descBusy     = prometheus.NewDesc("kvalloc_daemon_busy_total", "Requests dropped and answered BUSY: no frame buffers within the frame timeout.", nil, nil)
	descBufUsed  = prometheus.NewDesc("kvalloc_daemon_frame_buffer_bytes", "Bytes of the frame buffers all connections share, lent and kept for reuse.", nil, nil)
	descBufKept  = prometheus.NewDesc("kvalloc_daemon_frame_buffer_kept_bytes", "Bytes of shared frame buffers kept for reuse.", nil, nil)
	descBufPeak  = prometheus.NewDesc("kvalloc_daemon_frame_buffer_peak_bytes", "The most bytes of shared frame buffers at once.", nil, nil)
	descBudget   = prometheus.NewDesc("kvalloc_daemon_frame_buffer_budget_bytes", "The bound on the shared frame buffers (-buffer-budget).", nil, nil)
	descConnBuf  = prometheus.NewDesc("kvalloc_daemon_connection_buffer_bytes", "Bytes the open connections keep between requests: their own buffers and scratch.", nil, nil)
	descLogErrs  = prometheus.NewDesc("kvalloc_daemon_log_write_errors_total", "Log records the log's writer failed to take (a closed stderr); the daemon goes on.", nil, nil)
	descLogSupp  = prometheus.NewDesc("kvalloc_daemon_log_suppressed_total", "Log records dropped by the rate limit of repeated messages.", nil, nil)
	descOverLim  = prometheus.NewDesc("kvalloc_daemon_over_limit_keys_total", "Keys cut by a per-connection limit (-conn-read-locks, -conn-write-bytes): answered OVER_LIMIT, or SKIPPED after it in a prefix lookup.", nil, nil)
	limitDescs   = []*prometheus.Desc{descOverCap, descNoFDs, descHelloTO, descBusy, descBufUsed, descBufKept, descBufPeak, descBudget, descConnBuf, descLogErrs, descLogSupp, descOverLim}
	connLabels   = []string{"conn", "pid", "uid"}
	descConnW    = prometheus.NewDesc("kvalloc_daemon_connection_write_reservations", "Write reservations a connection holds.", connLabels, nil)
	descConnR    = prometheus.NewDesc("kvalloc_daemon_connection_read_locks", "Read locks a connection holds.", connLabels, nil)
	descConnAge  = prometheus.NewDesc("kvalloc_daemon_connection_age_seconds", "Time since a connection was accepted.", connLabels, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.inner.Describe(ch)
	for _, d := range []*prometheus.Desc{descConns, descAccepted, descClosed, descRefused, descRelW, descRelR, descRelB, descConnW, descConnR, descConnAge} {
		ch <- d
	}
	for _, d := range limitDescs {
		ch <- d
	}
	if c.s.cfg.DebugVerify {
		for _, d := range debugDescs {
			ch <- d
		}
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.inner.Collect(ch)
	s := c.s
	conns := s.Connections()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	k := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	g(descConns, float64(len(conns)))
	k(descAccepted, s.accepted.Load())
	k(descClosed, s.closed.Load())
	k(descRefused, s.refused.Load())
	k(descRelW, s.releasedWrites.Load())
	k(descRelR, s.releasedReads.Load())
	k(descRelB, s.relBytes.Load())
	k(descOverCap, s.overCap.Load())
	k(descNoFDs, s.noFDs.Load())
	k(descHelloTO, s.helloTimeouts.Load())
	k(descBusy, s.busies.Load())
	bs := s.bufs.stats()
	g(descBufUsed, float64(bs.used))
	g(descBufKept, float64(bs.kept))
	g(descBufPeak, float64(bs.peak))
	g(descBudget, float64(bs.budget))
	g(descConnBuf, float64(s.ConnectionBufferBytes()))
	k(descLogErrs, s.logs.writeErrors.Load())
	k(descLogSupp, s.logs.suppressed.Load())
	k(descOverLim, s.overLimit.Load())
	if s.cfg.DebugVerify {
		s.collectDebug(ch)
	}
	for _, cn := range conns {
		labels := []string{strconv.FormatUint(cn.ID, 10), strconv.Itoa(int(cn.Peer.PID)), strconv.FormatUint(uint64(cn.Peer.UID), 10)}
		g(descConnW, float64(cn.Writes), labels...)
		g(descConnR, float64(cn.ReadLocks), labels...)
		g(descConnAge, time.Since(cn.Opened).Seconds(), labels...)
	}
}

// serveMetrics serves /metrics on addr, which must be a loopback address.
func (s *Server) serveMetrics(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("kvallocd: metrics address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("kvallocd: metrics address %q is not a loopback address; /metrics is served on loopback only", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kvallocd: metrics: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector(), collectors.NewGoCollector())
	reg.MustRegister(l2Collector{&s.l2cnt, s}) // lookups' L1 and L2 hits (l2metrics.go)
	if c, ok := s.cfg.L2.Store.(prometheus.Collector); ok {
		reg.MustRegister(c) // the L2 tier's kvallocd_l2_* (package l2)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if s.cfg.DebugVerify {
		mux.HandleFunc("/debug/verify", s.serveDebug)
	}
	// Any local user can connect to a loopback port: bound what its
	// connections can hold (metricsConns at once, each for a bounded time).
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second, MaxHeaderBytes: 16 << 10}
	ln = limitListener(ln, metricsConns)
	s.metricsAddr = ln.Addr().String()
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics", "err", err)
		}
	}()
	return nil
}

// metricsConns caps the connections to /metrics open at once; more wait
// in the listen backlog.
const metricsConns = 16

// limitListener returns a listener that has at most n accepted
// connections open at once: Accept waits for one to close.
func limitListener(ln net.Listener, n int) net.Listener {
	return &capListener{Listener: ln, sem: make(chan struct{}, n)}
}

type capListener struct {
	net.Listener
	sem chan struct{}
}

func (l *capListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &capConn{Conn: c, release: func() { <-l.sem }}, nil
}

type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// MetricsAddr is the address /metrics is served on, or "" when it is not.
func (s *Server) MetricsAddr() string { return s.metricsAddr }
