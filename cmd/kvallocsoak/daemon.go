//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/kvalloc/kvalloc/server"
)

// daemon is the kvallocd process under soak.
type daemon struct {
	cmd     *exec.Cmd
	sock    string
	metrics string // host:port of /metrics and /debug/verify
	log     *os.File
	exited  chan struct{} // closed when it has exited; err is then set
	err     error
	http    http.Client
}

// startDaemon starts kvallocd with a pool of pool bytes, on a socket in
// dir, and waits until it serves.
func startDaemon(bin, dir string, pool int64) (*daemon, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d := &daemon{sock: filepath.Join(dir, "kvallocd.sock"), metrics: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		exited: make(chan struct{}), http: http.Client{Timeout: 60 * time.Second}}
	if d.log, err = os.Create(filepath.Join(dir, "kvallocd.log")); err != nil {
		return nil, err
	}
	d.cmd = exec.Command(bin, "-socket", d.sock, "-pool-size", strconv.FormatInt(pool, 10), "-populate=false",
		"-evict-on-demand", "-eviction", "prefix", "-placement", "scattered",
		"-metrics", d.metrics, "-debug-verify", "-log-level", "info")
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = diesWithSoak()
	if err := d.cmd.Start(); err != nil {
		d.log.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-d.exited:
			return nil, fmt.Errorf("kvallocd exited at start (%v): %s", d.err, d.logTail(20))
		default:
		}
		if _, err := os.Stat(d.sock); err == nil {
			if _, err := d.verify(); err == nil {
				return d, nil
			}
		}
		if time.Since(start) > 60*time.Second {
			d.kill()
			return nil, fmt.Errorf("kvallocd did not serve within 60 s: %s", d.logTail(20))
		}
	}
}

// freePort returns a loopback port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// verify runs the daemon's Verify (/debug/verify).
func (d *daemon) verify() (server.DebugReport, error) {
	var r server.DebugReport
	resp, err := d.http.Get("http://" + d.metrics + "/debug/verify")
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return r, fmt.Errorf("/debug/verify: %s", resp.Status)
	}
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

// heapInuse reads go_memstats_heap_inuse_bytes from /metrics.
func (d *daemon) heapInuse() (int64, error) {
	resp, err := d.http.Get("http://" + d.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return metricValue(resp.Body, "go_memstats_heap_inuse_bytes")
}

// metricValue finds an unlabelled sample of name in the Prometheus text
// format.
func metricValue(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("/metrics: %s %q: %w", name, v, err)
			}
			return int64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/metrics has no %s", name)
}

// procStatus is the memory lines of /proc/PID/status, in bytes.
type procStatus struct {
	VmRSS, RssAnon, RssFile, RssShmem int64
}

// readProcStatus reads pid's /proc/PID/status.
func readProcStatus(pid int) (procStatus, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	return parseProcStatus(data)
}

// parseProcStatus parses the VmRSS, RssAnon, RssFile and RssShmem lines
// ("RssAnon:	    1684 kB").
func parseProcStatus(data []byte) (procStatus, error) {
	var p procStatus
	fields := map[string]*int64{"VmRSS": &p.VmRSS, "RssAnon": &p.RssAnon, "RssFile": &p.RssFile, "RssShmem": &p.RssShmem}
	seen := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		name, rest, ok := strings.Cut(string(line), ":")
		dst := fields[name]
		if !ok || dst == nil {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return p, fmt.Errorf("/proc status: %q", line)
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return p, fmt.Errorf("/proc status: %q", line)
		}
		*dst = v << 10
		seen++
	}
	if seen != len(fields) {
		return p, errors.New("/proc status lacks VmRSS, RssAnon, RssFile or RssShmem")
	}
	return p, nil
}

// stop sends SIGTERM and waits for the exit, at most 60 s; it returns the
// exit's error, nil for a clean exit 0.
func (d *daemon) stop() error {
	select {
	case <-d.exited:
		return fmt.Errorf("kvallocd had exited: %v", d.err)
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return d.err
	case <-time.After(60 * time.Second):
		d.kill()
		return errors.New("kvallocd did not exit within 60 s of SIGTERM")
	}
}

// kill kills the daemon, if it still runs, and waits for it.
func (d *daemon) kill() {
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// logTail is the last n lines of the daemon's log.
func (d *daemon) logTail(n int) string {
	data, _ := os.ReadFile(d.log.Name())
	return tail(string(data), n)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// poolTouched returns the bytes of the pool's memfd that are backed by
// memory: the pages some client touched (st_blocks of the memfd, found
// among the daemon's open files). They are shared memory: counted in the
// RssShmem of every process that touched them, not in the daemon's, which
// never writes the pool.
func (d *daemon) poolTouched() (int64, error) {
	dir := fmt.Sprintf("/proc/%d/fd", d.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || !strings.HasPrefix(link, "/memfd:") {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil {
			return 0, err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			return st.Blocks * 512, nil
		}
	}
	return 0, errors.New("the daemon has no memfd open")
}
