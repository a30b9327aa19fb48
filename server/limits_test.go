//go:build linux

package server_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// metric reads one of the daemon's metrics (the first series of name).
func metric(t testing.TB, s *server.Server, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// readAnswer reads one answer from nc before deadline.
func readAnswer(nc *net.UnixConn, deadline time.Time) (wire.Answer, error) {
	_ = nc.SetReadDeadline(deadline)
	f, err := wire.ReadFrame(nc, nil)
	if err != nil {
		return wire.Answer{}, err
	}
	var a wire.Answer
	var d wire.Decoder
	err = d.DecodeAnswer(f, &a)
	return a, err
}

// eof checks that the daemon closed nc.
func eof(t testing.TB, nc *net.UnixConn) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := nc.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("the daemon kept the connection open: read %d, %v", n, err)
	}
}

// TestConnectionCaps: past -max-conns, and past -max-conns-per-uid, a
// client is refused at once with TOO_MANY_CONNECTIONS and a message that
// names the flag; once a connection closes, the next is served.
func TestConnectionCaps(t *testing.T) {
	for _, tc := range []struct {
		name          string
		total, perUID int
		held          int
		flag          string
	}{
		{"total", 3, 100, 3, "-max-conns)"},
		{"per-uid", 100, 2, 2, "-max-conns-per-uid)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, server.Config{MaxConns: tc.total, MaxConnsPerUID: tc.perUID})
			var held []*client.Client
			for range tc.held {
				held = append(held, dial(t, s))
			}
			t0 := time.Now()
			_, err := client.Dial(s.SocketPath(), client.Options{Timeout: 5 * time.Second})
			if !errors.Is(err, wire.ErrTooManyConnections) || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("a connection past the cap: %v", err)
			}
			if d := time.Since(t0); d > 2*time.Second {
				t.Fatalf("the refusal took %v", d)
			}
			if got := metric(t, s, "kvalloc_daemon_connections_over_cap_total"); got != 1 {
				t.Fatalf("over_cap_total %v", got)
			}
			// A raw connection past the cap reads the refusal as a hello
			// answer, then EOF.
			nc, err := net.Dial("unix", s.SocketPath())
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			a, err := readAnswer(nc.(*net.UnixConn), time.Now().Add(10*time.Second))
			if err != nil || a.Code != wire.CodeTooManyConnections || a.Type != wire.TypeHello.Answer() {
				t.Fatalf("raw: %v %+v", err, a)
			}
			eof(t, nc.(*net.UnixConn))
			held[0].Close()
			waitClosed(t, s, 1)
			c := dial(t, s)
			if err := c.Ping(); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.ConnsOpen != uint64(tc.held) {
				t.Fatalf("%d open", st.ConnsOpen)
			}
		})
	}
}

// squatter (role) runs as another uid: it opens clients until the daemon
// refuses one, prints how many it holds and the refusal, and waits.
func squatter(path string) int {
	var held []*client.Client
	for range 100 {
		c, err := client.Dial(path, client.Options{Timeout: 5 * time.Second})
		if err != nil {
			fmt.Printf("held %d\n", len(held))
			fmt.Println("refused:", err)
			time.Sleep(time.Hour)
			return 0
		}
		held = append(held, c)
	}
	fmt.Println("never refused")
	return 1
}

// TestCapPerUIDAnotherUser: another allowed uid that opens connections up
// to its cap is refused past it, and this uid is still served.
func TestCapPerUIDAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestCapPerUIDAnotherUser runs a child as uid 65534 and needs root: run the server tests as root")
	}
	dir, err := os.MkdirTemp("", "kvalloc-cap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	bin := filepath.Join(dir, "child.test")
	copyFile(t, exe, bin)
	s := start(t, server.Config{SocketPath: filepath.Join(dir, "kvallocd.sock"), SocketMode: 0o666,
		AllowUIDs: []uint32{uint32(os.Geteuid()), 65534}, MaxConns: 100, MaxConnsPerUID: 3})
	_, lines := child(t, "squatter", s.SocketPath(), &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}, bin)
	if l := expect(t, lines, "held "); l != "held 3" {
		t.Fatalf("squatter: %q", l)
	}
	if l := expect(t, lines, "refused: "); !strings.Contains(l, "TOO_MANY_CONNECTIONS") || !strings.Contains(l, "uid 65534 has 3 connections open") {
		t.Fatalf("squatter: %q", l)
	}
	for range 3 {
		if err := dial(t, s).Ping(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelloTimeout: connections that say nothing, or half a hello, are
// answered TIMEOUT at the hello timeout and closed; one that said hello
// may stay idle past it.
func TestHelloTimeout(t *testing.T) {
	const ht = 300 * time.Millisecond
	s := start(t, server.Config{HelloTimeout: ht})
	hello := raw(t, s, true)
	t0 := time.Now()
	var silent []*net.UnixConn
	for i := range 2 {
		nc, err := net.Dial("unix", s.SocketPath())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		if i == 1 {
			var enc wire.Encoder
			f, _ := enc.AppendRequest(nil, &wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version})
			nc.Write(f[:10])
		}
		silent = append(silent, nc.(*net.UnixConn))
	}
	for i, nc := range silent {
		a, err := readAnswer(nc, time.Now().Add(10*time.Second))
		if err != nil || a.Code != wire.CodeTimeout || !strings.Contains(a.Message, "no hello within 300ms") {
			t.Fatalf("silent %d: %v %+v", i, err, a)
		}
		eof(t, nc)
	}
	if d := time.Since(t0); d < ht {
		t.Fatalf("closed after %v, before the hello timeout", d)
	}
	time.Sleep(ht)
	hello.send(hello.frame(wire.Request{Type: wire.TypePing, ID: 2, Epoch: hello.epoch}))
	if a := hello.answer(); a.Code != wire.CodeOK {
		t.Fatalf("idle connection after the hello timeout: %v", a.Err())
	}
	if got := metric(t, s, "kvalloc_daemon_hello_timeouts_total"); got != 2 {
		t.Fatalf("hello_timeouts_total %v", got)
	}
}

// limitDaemon (role) serves with RLIMIT_NOFILE set to KVALLOC_TEST_NOFILE,
// caps far above it, and the hello timeout KVALLOC_TEST_HELLO_TIMEOUT,
// until SIGTERM.
func limitDaemon() int {
	n, _ := strconv.ParseUint(os.Getenv("KVALLOC_TEST_NOFILE"), 10, 64)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: n, Max: n}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	ht, _ := time.ParseDuration(os.Getenv("KVALLOC_TEST_HELLO_TIMEOUT"))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := server.New(server.Config{SocketPath: os.Getenv(childSocket), PoolSize: 64 << 20, HelloTimeout: ht, MaxConns: 100000, MaxConnsPerUID: 100000, Logger: log})
	if err != nil {
		fmt.Println("new:", err)
		return 1
	}
	fmt.Println("ready")
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	s.Close()
	<-done
	return 0
}

// TestOutOfDescriptors: a daemon process with 64 descriptors, flooded
// with silent connections, still answers every connection it cannot take
// with TOO_MANY_CONNECTIONS (it keeps a spare descriptor for that), so a
// legitimate client is told why at once instead of timing out; the silent
// ones are closed at the hello timeout, and then the client is served.
func TestOutOfDescriptors(t *testing.T) {
	const ht = 4 * time.Second
	t.Setenv("KVALLOC_TEST_NOFILE", "64")
	t.Setenv("KVALLOC_TEST_HELLO_TIMEOUT", ht.String())
	sock := filepath.Join(t.TempDir(), "k.sock")
	cmd, lines := child(t, "limitdaemon", sock, nil, "")
	expect(t, lines, "ready")
	t0 := time.Now()
	var conns []*net.UnixConn
	for range 100 {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		conns = append(conns, nc.(*net.UnixConn))
	}
	// The refused ones have their answer; the others are silent, held.
	var silent []*net.UnixConn
	refused := 0
	type read struct {
		a   wire.Answer
		err error
	}
	reads := make([]chan read, len(conns))
	until := time.Now().Add(time.Second)
	for i, nc := range conns {
		reads[i] = make(chan read, 1)
		go func() {
			a, err := readAnswer(nc, until)
			reads[i] <- read{a, err}
		}()
	}
	for i, nc := range conns {
		r := <-reads[i]
		a, err := r.a, r.err
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			silent = append(silent, nc)
		case err == nil && a.Code == wire.CodeTooManyConnections && strings.Contains(a.Message, "out of file descriptors"):
			refused++
		default:
			t.Fatalf("a flooding connection read %v %+v", err, a)
		}
	}
	if refused < 36 || len(silent) < 20 {
		t.Fatalf("%d refused, %d held", refused, len(silent))
	}
	t.Logf("%d connections held, %d refused for want of descriptors", len(silent), refused)
	t1 := time.Now()
	_, err := client.Dial(sock, client.Options{Timeout: 3 * time.Second})
	if !errors.Is(err, wire.ErrTooManyConnections) || !strings.Contains(err.Error(), "RLIMIT_NOFILE") {
		t.Fatalf("a legitimate client, the daemon out of descriptors: %v", err)
	}
	if d := time.Since(t1); d > time.Second {
		t.Fatalf("the refusal took %v", d)
	}
	if time.Since(t0) > ht {
		t.Fatalf("the flood took longer than the hello timeout (%v): the test proves nothing on this machine", time.Since(t0))
	}
	for i, nc := range silent {
		a, err := readAnswer(nc, time.Now().Add(ht+10*time.Second))
		if err != nil || a.Code != wire.CodeTimeout {
			t.Fatalf("silent %d: %v %+v", i, err, a)
		}
		eof(t, nc)
	}
	if d := time.Since(t0); d < ht {
		t.Fatalf("silent connections closed after %v, before the hello timeout", d)
	}
	c, err := client.Dial(sock, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("after the hello timeout: %v", err)
	}
	if _, err := c.ReserveWrite([]l1.ObjectKey{{ChunkHash: "after"}}, nil, 4096, l1.ModeAll); err != nil {
		t.Fatal(err)
	}
	c.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the daemon after SIGTERM: %v", err)
	}
}
