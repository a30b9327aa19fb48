//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
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

func daemon(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "KVALLOC_TEST_DAEMON=1")
	var log bytes.Buffer
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &log
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

// TestFlags: -h prints every flag and exits 0; bad flags exit 2 with a
// message.
func TestFlags(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out); code != 0 {
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
		if code := run(context.Background(), args, &out); code != 2 || out.Len() == 0 {
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
