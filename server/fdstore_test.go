//go:build linux

package server_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// fakeSystemd is the other end of $NOTIFY_SOCKET, as systemd's manager
// is: it records READY=1 and keeps the fd store (FDSTORE=1,
// FDSTOREREMOVE=1, by FDNAME).
type fakeSystemd struct {
	path  string
	c     *net.UnixConn
	mu    sync.Mutex
	store map[string][]int
	ready int
	msgs  []string
}

func newFakeSystemd(t *testing.T, dir string) *fakeSystemd {
	f := &fakeSystemd{path: filepath.Join(dir, "notify"), store: map[string][]int{}}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: f.path, Net: "unixgram"})
	require.NoError(t, err)
	f.c = c
	t.Cleanup(func() { c.Close() })
	go func() {
		buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(64*4))
		for {
			n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
			if err != nil {
				return
			}
			var fds []int
			if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, m := range msgs {
					got, _ := unix.ParseUnixRights(&m)
					fds = append(fds, got...)
				}
			}
			f.handle(string(buf[:n]), fds)
		}
	}()
	return f
}

func (f *fakeSystemd) handle(msg string, fds []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, msg)
	kv := map[string]string{}
	for _, l := range strings.Split(msg, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			kv[k] = v
		}
	}
	if kv["READY"] == "1" {
		f.ready++
	}
	name := kv["FDNAME"]
	if kv["FDSTOREREMOVE"] == "1" {
		for _, fd := range f.store[name] {
			unix.Close(fd)
		}
		delete(f.store, name)
	}
	if kv["FDSTORE"] == "1" {
		f.store[name] = append(f.store[name], fds...)
		return
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// until waits for cond, under the lock.
func (f *fakeSystemd) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Fatalf("systemd never saw %s; it got %q", what, f.msgs)
}

// files returns dups of the stored descriptors of names, in order, as
// the files a started unit gets from 3 on.
func (f *fakeSystemd) files(t *testing.T, names ...string) []*os.File {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*os.File
	for _, n := range names {
		require.Len(t, f.store[n], 1, "the fd store's %q", n)
		fd, err := unix.Dup(f.store[n][0])
		require.NoError(t, err)
		out = append(out, os.NewFile(uintptr(fd), n))
	}
	return out
}

// startUnit starts a daemon process as systemd starts a unit's: with
// $NOTIFY_SOCKET, and with files passed from descriptor 3 on under
// $LISTEN_FDS, $LISTEN_FDNAMES and $LISTEN_PID (set by a shell that then
// execs the daemon, keeping its pid).
func startUnit(t *testing.T, f *fakeSystemd, sock string, files []*os.File, names ...string) *hoDaemon {
	t.Helper()
	return startUnitEnv(t, f, sock, nil, files, names...)
}

// startUnitEnv is startUnit with more of the daemon's environment.
func startUnitEnv(t *testing.T, f *fakeSystemd, sock string, env []string, files []*os.File, names ...string) *hoDaemon {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRole+"=handoffd", childSocket+"="+sock, "KVALLOC_HO_SYSTEMD=1", "NOTIFY_SOCKET="+f.path)
	cmd.Env = append(cmd.Env, env...)
	if len(files) > 0 {
		cmd.ExtraFiles = files
		cmd.Env = append(cmd.Env, fmt.Sprintf("LISTEN_FDS=%d", len(files)), "LISTEN_FDNAMES="+strings.Join(names, ":"))
	}
	d, err := launchHandoffd(t, cmd)
	require.NoError(t, err)
	require.NoError(t, d.wait())
	for _, fl := range files {
		fl.Close()
	}
	return d
}

// TestFDStore: under a stand-in for systemd's manager, a daemon reports
// READY=1 and stores its pool; stopped, it stores its index; the next
// daemon, given both, serves every object with its stamps (started from
// the fd store) and consumes the index. Killed, it leaves no fresh index:
// the next start is cold, and so is one handed the consumed index.
func TestFDStore(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kvallocd.sock")
	f := newFakeSystemd(t, dir)
	a := startUnit(t, f, sock, nil)
	require.Equal(t, "cold", a.how)
	f.until(t, "READY=1 and the pool", func() bool { return f.ready == 1 && len(f.store["pool"]) == 1 })
	c, err := client.Dial(sock, client.Options{})
	require.NoError(t, err)
	ks := make([]l1.ObjectKey, 50)
	for i := range ks {
		ks[i] = hoKeyOf(fmt.Sprintf("fdstore-%d", i))
	}
	putStamped(t, c, ks, handoffObject)
	c.Close()
	a.cmd.Process.Signal(syscall.SIGTERM)
	<-a.exited
	f.until(t, "the index", func() bool { return len(f.store["index"]) == 1 })

	consumed := f.files(t, "index")[0]
	b := startUnit(t, f, sock, f.files(t, "pool", "index"), "pool", "index")
	require.Equal(t, "fdstore", b.how, b.why)
	f.until(t, "the second READY=1, the index dropped", func() bool { return f.ready == 2 && len(f.store["index"]) == 0 })
	c, err = client.Dial(sock, client.Options{})
	require.NoError(t, err)
	require.Equal(t, b.epoch, c.Epoch())
	rs, err := c.ReserveRead(ks, 1)
	require.NoError(t, err)
	for i, r := range rs {
		require.Equal(t, wire.StatusOK, r.Status, "key %v", ks[i])
		buf, err := c.Bytes(r.Block)
		require.NoError(t, err)
		require.Equal(t, stampOf(ks[i]), binary.LittleEndian.Uint64(buf))
		require.Equal(t, stampOf(ks[i]), binary.LittleEndian.Uint64(buf[handoffObject-8:]))
	}
	c.Close()

	// A crash: the pool alone in the store.
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
	d := startUnit(t, f, sock, f.files(t, "pool"), "pool")
	require.Equal(t, "cold", d.how)
	require.Contains(t, d.why, "no index")
	f.until(t, "the third READY=1", func() bool { return f.ready == 3 })
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited

	// The consumed index, with the pool it described.
	e := startUnit(t, f, sock, append(f.files(t, "pool"), consumed), "pool", "index")
	require.Equal(t, "cold", e.how)
	require.Contains(t, e.why, "consumed")
	e.cmd.Process.Signal(syscall.SIGTERM)
	<-e.exited
}

// TestHandoffUnderSystemd: a successor started inside the unit with
// Takeover (systemctl reload) reports READY=1 with its MAINPID, and keeps
// the fd store's pool current.
func TestHandoffUnderSystemd(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kvallocd.sock")
	f := newFakeSystemd(t, dir)
	a := startUnit(t, f, sock, nil)
	f.until(t, "READY=1", func() bool { return f.ready == 1 })
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRole+"=handoffd", childSocket+"="+sock, "KVALLOC_HO_SYSTEMD=1",
		"NOTIFY_SOCKET="+f.path, "KVALLOC_HO_TAKEOVER=true")
	b, err := launchHandoffd(t, cmd)
	require.NoError(t, err)
	require.NoError(t, b.wait())
	require.Equal(t, "handoff", b.how, b.why)
	<-a.exited
	want := fmt.Sprintf("MAINPID=%d\nREADY=1", b.cmd.Process.Pid)
	f.until(t, want, func() bool {
		for _, m := range f.msgs {
			if strings.HasPrefix(m, want) {
				return len(f.store["pool"]) == 1
			}
		}
		return false
	})
	b.cmd.Process.Signal(syscall.SIGTERM)
	<-b.exited
}
