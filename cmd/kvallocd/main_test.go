//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// The test binary runs as the daemon when KVALLOC_TEST_DAEMON is set, with
// the arguments after "--".
func TestMain(m *testing.M) {
	if os.Getenv("KVALLOC_TEST_DAEMON") == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"kvallocd"}, os.Args[i+1:]...)
				main()
			}
		}
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func daemon(t *testing.T, args ...string) (*exec.Cmd, *lockedBuffer) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "KVALLOC_TEST_DAEMON=1")
	log := &lockedBuffer{} // the test reads it while the daemon writes
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, log
}

func waitSocket(t *testing.T, path string) {
	for start := time.Now(); time.Since(start) < 30*time.Second; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("no socket at %s after 30 s", path)
}

// TestSIGTERM: the daemon serves on its flags, refuses a second daemon on
// its socket, releases a client's locks when the client goes, and on
// SIGTERM shuts down cleanly: exit 0, socket removed.
func TestSIGTERM(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "k.sock")
	cmd, log := daemon(t, "-socket", sock, "-pool-size", "32MiB", "-segment-size", "8MiB", "-log-level", "debug")
	waitSocket(t, sock)
	c, err := client.Dial(sock, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.PoolSize() != 32<<20 {
		t.Fatalf("pool %d", c.PoolSize())
	}
	if _, err := c.ReserveWrite([]l1.ObjectKey{{ChunkHash: "a"}}, nil, 4096, l1.ModeAll); err != nil {
		t.Fatal(err)
	}
	second, slog := daemon(t, "-socket", sock, "-pool-size", "1MiB")
	if err := second.Wait(); err == nil || second.ProcessState.ExitCode() != 1 || !strings.Contains(slog.String(), "another kvallocd") {
		t.Fatalf("second daemon: %v, %q", err, slog)
	}
	c.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, log)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	for _, want := range []string{"kvallocd ready", "aborted_writes=1", "shutting down on a signal", "kvallocd stopped"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestSIGHUP: a hangup is logged and ignored; the daemon goes on serving
// and still stops cleanly on SIGTERM.
func TestSIGHUP(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "k.sock")
	cmd, log := daemon(t, "-socket", sock, "-pool-size", "32MiB", "-segment-size", "8MiB")
	waitSocket(t, sock)
	cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(200 * time.Millisecond)
	c, err := client.Dial(sock, client.Options{})
	if err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, log)
	}
	if !strings.Contains(log.String(), "SIGHUP ignored") {
		t.Fatalf("log lacks the SIGHUP:\n%s", log)
	}
}

// TestFlags: -h prints every flag and exits 0; bad flags exit 2 with a
// message.
func TestFlags(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, nil); code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	for _, f := range []string{"-socket", "-socket-mode", "-allow-uid", "-allow-gid", "-pool-size", "-align", "-hugepages",
		"-populate", "-mlock", "-placement", "-eviction", "-evict-on-demand", "-write-ttl", "-read-ttl", "-metrics", "-debug-verify", "-log-level",
		"-hello-timeout", "-max-conns", "-max-conns-per-uid", "-buffer-budget"} {
		if !strings.Contains(out.String(), "  "+f+" ") && !strings.Contains(out.String(), "  "+f+"\n") {
			t.Errorf("-h lacks %s", f)
		}
	}
	for _, args := range [][]string{
		{"-pool-size", "lots"}, {"-socket-mode", "999"}, {"-allow-uid", "root"}, {"-placement", "everywhere"},
		{"-eviction", "random"}, {"stray"}, {"-max-conns", "0"}, {"-max-conns-per-uid", "-1"}, {"-hello-timeout", "0s"},
		{"-buffer-budget", "lots"},
	} {
		out.Reset()
		if code := run(context.Background(), args, &out, nil); code != 2 || out.Len() == 0 {
			t.Errorf("%q: exit %d, %q", args, code, out.String())
		}
	}
	for in, want := range map[string]int64{"4096": 4096, "64MiB": 64 << 20, "45GiB": 45 << 30, "1TiB": 1 << 40} {
		if got, err := size(in); err != nil || got != want {
			t.Errorf("size(%q) = %d, %v", in, got, err)
		}
	}
}

// TestClosedStderr: a daemon whose stderr has no reader left goes on
// serving. A client that disconnects holding a write makes it log (the
// release), that write fails with EPIPE instead of killing the daemon with
// SIGPIPE, and the failure is counted in
// kvalloc_daemon_log_write_errors_total.
func TestClosedStderr(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "k.sock")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "-test.run=^$", "--", "-socket", sock, "-pool-size", "32MiB", "-segment-size", "8MiB", "-metrics", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "KVALLOC_TEST_DAEMON=1")
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var werr error
	exited := make(chan struct{})
	go func() { werr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	// The ready line names the metrics address; then the reader goes.
	addr := ""
	sc := bufio.NewScanner(pr)
	for addr == "" && sc.Scan() {
		if l := sc.Text(); strings.Contains(l, "kvallocd ready") {
			if _, rest, ok := strings.Cut(l, " metrics="); ok {
				addr, _, _ = strings.Cut(rest, " ")
			}
		}
	}
	if addr == "" {
		t.Fatalf("no ready line with the metrics address: %v", sc.Err())
	}
	pr.Close()
	c, err := client.Dial(sock, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReserveWrite([]l1.ObjectKey{{ChunkHash: "held"}}, nil, 4096, l1.ModeAll); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("the daemon died when its stderr had no reader: %v", werr)
		default:
		}
		if n, err := scrape(addr, "kvalloc_daemon_log_write_errors_total"); err == nil && n >= 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no log write error counted in 10 s: %v, %v", n, err)
		}
	}
	c, err = client.Dial(sock, client.Options{})
	if err != nil {
		t.Fatalf("after a log line to a closed stderr: %v", err)
	}
	st, err := c.Stats()
	if err != nil || st.ReleasedWrites != 1 || st.WriteLocked != 0 {
		t.Fatalf("stats: %v %+v", err, st)
	}
	c.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	<-exited
	if werr != nil {
		t.Fatalf("after SIGTERM: %v", werr)
	}
}

// scrape reads one metric from /metrics at addr.
func scrape(addr, name string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// TestIdleConnectionsRSS is the measured row of 200 idle connections
// after large frames: a daemon process (KVALLOC_RSS_DAEMON names another
// kvallocd binary to measure instead) serves 200 connections one legal
// 16 MiB frame each, 8 at a time, and then, with all 200 idle, its
// RssAnon must come back near its size before them, far under the
// 3.2 GiB the 200 frames would be if each connection kept its
// own: its Go heap in use within 32 MiB and its RssAnon within 32 MiB of
// its size before them (not under the race detector, whose shadow memory
// stays), within 15 s. It logs the numbers server/DESIGN.md quotes.
func TestIdleConnectionsRSS(t *testing.T) {
	const conns, frameSize = 200, wire.MaxFrame
	sock := filepath.Join(t.TempDir(), "k.sock")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"-socket", sock, "-pool-size", "64MiB", "-populate=false", "-metrics", addr}
	var cmd *exec.Cmd
	if bin := os.Getenv("KVALLOC_RSS_DAEMON"); bin != "" {
		cmd = exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	} else {
		cmd, _ = daemon(t, args...)
	}
	waitSocket(t, sock)
	rss := func() float64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "RssAnon:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
				return kb / 1024
			}
		}
		t.Fatal("no RssAnon")
		return 0
	}
	time.Sleep(200 * time.Millisecond)
	before := rss()
	frame := bigFrame(t, frameSize)
	ncs := make([]*net.UnixConn, conns)
	work := make(chan int)
	errs := make(chan error, conns)
	for range 8 {
		go func() {
			for i := range work {
				nc, epoch, err := helloRaw(sock)
				if err == nil {
					ncs[i] = nc
					f := append([]byte(nil), frame...)
					binary.LittleEndian.PutUint64(f[16:], epoch)
					err = roundTrip(nc, f)
				}
				errs <- err
			}
		}()
	}
	t0 := time.Now()
	go func() {
		for i := range conns {
			work <- i
		}
		close(work)
	}()
	for range conns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Since(t0)
	defer func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}()
	after := rss()
	m := func(name string) float64 {
		v, err := scrape(addr, name)
		if err != nil {
			t.Fatalf("/metrics: %v", err)
		}
		return v / (1 << 20)
	}
	// Idle, the daemon drops its kept buffers, the connections their
	// scratch, and the runtime gives the memory back within a few seconds
	// (server/buffers.go, trim). Under the race detector, whose shadow
	// memory is in RssAnon and stays, the Go heap alone is bounded.
	limit := before + 32
	const heapLimit = 32
	ok := func(rss, heap float64) bool { return heap <= heapLimit && (raceOn || rss <= limit) }
	idle, heap, waited := rss(), m("go_memstats_heap_inuse_bytes"), time.Duration(0)
	for ; !ok(idle, heap) && waited < 15*time.Second; idle, heap = rss(), m("go_memstats_heap_inuse_bytes") {
		time.Sleep(100 * time.Millisecond)
		waited += 100 * time.Millisecond
	}
	t.Logf("%d connections, one %d-byte frame each, 8 at a time, in %v: RssAnon %.1f MiB before, %.1f MiB at once after, %.1f MiB after %v idle; "+
		"connection buffers %.2f MiB, shared frame buffers %.1f MiB (peak %.1f), Go heap in use %.1f MiB (race detector: %v)",
		conns, frameSize, sent.Round(time.Millisecond), before, after, idle, waited,
		m("kvalloc_daemon_connection_buffer_bytes"), m("kvalloc_daemon_frame_buffer_bytes"), m("kvalloc_daemon_frame_buffer_peak_bytes"), heap, raceOn)
	if !ok(idle, heap) {
		t.Fatalf("with %d idle connections 15 s after large frames: Go heap in use %.1f MiB (at most %d), RssAnon %.1f MiB (at most %.0f, 32 MiB over the daemon's before them; not checked under the race detector)",
			conns, heap, heapLimit, idle, limit)
	}
	if cb := m("kvalloc_daemon_connection_buffer_bytes"); cb > float64(conns)*64/1024 {
		t.Fatalf("the idle connections keep %.2f MiB", cb)
	}
}

// bigFrame is a reserve_read of keys with 4096-byte hashes, exactly size
// bytes, epoch 0 (set at bytes 16 to 24).
func bigFrame(t *testing.T, size int) []byte {
	var enc wire.Encoder
	hash := strings.Repeat("h", wire.MaxStringLen)
	q := wire.Request{Type: wire.TypeReserveRead, ID: 2, Locks: 1}
	one, _ := enc.AppendRequest(nil, &wire.Request{Type: wire.TypeReserveRead, ID: 2, Locks: 1, Keys: []l1.ObjectKey{{ChunkHash: hash, Model: "m"}}})
	const per = 16 + wire.MaxStringLen
	fixed := len(one) - per
	n := (size - fixed) / per
	left := size - fixed - n*per
	if left < 24 {
		n, left = n-1, left+per
	}
	for i := range n + 1 {
		h := (fmt.Sprintf("%08d", i) + hash)[:wire.MaxStringLen]
		if i == n {
			h = h[:left-16]
		}
		q.Keys = append(q.Keys, l1.ObjectKey{ChunkHash: h, Model: "m"})
	}
	f, err := enc.AppendRequest(nil, &q)
	if err != nil || len(f) != size {
		t.Fatalf("frame of %d bytes, want %d: %v", len(f), size, err)
	}
	return f
}

// helloRaw connects, says hello, closes the memfd it gets and returns the
// connection and the epoch.
func helloRaw(sock string) (*net.UnixConn, uint64, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, 0, err
	}
	nc := c.(*net.UnixConn)
	var enc wire.Encoder
	f, _ := enc.AppendRequest(nil, &wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version})
	if _, err := nc.Write(f); err != nil {
		return nil, 0, err
	}
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4))
	_ = nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, oobn, _, _, err := nc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, 0, err
	}
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil && len(msgs) == 1 {
		if fds, err := unix.ParseUnixRights(&msgs[0]); err == nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
	var a wire.Answer
	var d wire.Decoder
	if err := d.DecodeAnswer(buf[:n], &a); err != nil || a.Code != wire.CodeOK {
		return nil, 0, fmt.Errorf("hello: %v %v", err, a.Err())
	}
	return nc, a.Epoch, nil
}

// roundTrip sends a frame and reads its answer, which must be OK.
func roundTrip(nc *net.UnixConn, f []byte) error {
	_ = nc.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := nc.Write(f); err != nil {
		return err
	}
	b, err := wire.ReadFrame(nc, nil)
	if err != nil {
		return err
	}
	var a wire.Answer
	var d wire.Decoder
	if err := d.DecodeAnswer(b, &a); err != nil {
		return err
	}
	return a.Err()
}
