//go:build linux

package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
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
	reg.MustRegister(l2Collector{&s.l2cnt}) // lookups' L1 and L2 hits (l2metrics.go)
	if c, ok := s.cfg.L2.Store.(prometheus.Collector); ok {
		reg.MustRegister(c) // the L2 tier's kvallocd_l2_* (package l2)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if s.cfg.DebugVerify {
		mux.HandleFunc("/debug/verify", s.serveDebug)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	s.metricsAddr = ln.Addr().String()
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics", "err", err)
		}
	}()
	return nil
}

// MetricsAddr is the address /metrics is served on, or "" when it is not.
func (s *Server) MetricsAddr() string { return s.metricsAddr }
