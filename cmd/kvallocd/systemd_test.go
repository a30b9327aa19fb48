//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
)

// systemdSocketActivate is the distribution's (Debian's systemd package;
// make test installs it when missing).
const systemdSocketActivate = "/usr/bin/systemd-socket-activate"

// TestSocketActivation runs kvallocd under systemd-socket-activate: the
// tool binds the socket and execs kvallocd at the first connection, with
// the socket in LISTEN_FDS. kvallocd serves that socket (it binds none of
// its own: the file keeps its inode), the connection that woke it is
// served, and it exits on SIGTERM leaving the file, which is the tool's.
func TestSocketActivation(t *testing.T) {
	if _, err := os.Stat(systemdSocketActivate); err != nil {
		t.Fatalf("%s is missing (%v): install Debian's systemd package (apt-get install systemd; make test does)", systemdSocketActivate, err)
	}
	sock := filepath.Join(t.TempDir(), "kvallocd.sock")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(systemdSocketActivate, "-l", sock, "--fdname=kvallocd.socket", "-E", "KVALLOC_TEST_DAEMON=1",
		exe, "-test.run=^$", "--", "-socket", sock, "-pool-size", "32MiB", "-segment-size", "8MiB", "-populate=false")
	var log lockedBuffer
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
	waitSocket(t, sock)
	var before unix.Stat_t
	if err := unix.Stat(sock, &before); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(sock, client.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("dial (the first connection starts kvallocd): %v\n%s", err, log.String())
	}
	ks := []l1.ObjectKey{{ChunkHash: "activated", Model: "m"}}
	rs, err := c.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	if err != nil || rs[0].Status != 0 {
		t.Fatalf("reserve: %v %v", rs, err)
	}
	c.Close()
	var after unix.Stat_t
	if err := unix.Stat(sock, &after); err != nil {
		t.Fatal(err)
	}
	if after.Ino != before.Ino {
		t.Fatalf("kvallocd replaced the activated socket's file (inode %d, was %d)", after.Ino, before.Ino)
	}
	if !strings.Contains(log.String(), "socket activation") {
		t.Fatalf("kvallocd did not say it serves the socket systemd passed:\n%s", log.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("kvallocd exited: %v\n%s", err, log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("kvallocd did not stop on SIGTERM")
	}
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("kvallocd removed the socket file, which belongs to systemd: %v", err)
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
