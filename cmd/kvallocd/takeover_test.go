//go:build linux

package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// daemonLog is daemon with a log safe to read while the process runs.
func daemonLog(t *testing.T, args ...string) (*exec.Cmd, *lockedBuffer) {
	exe, _ := os.Executable()
	cmd := exec.Command(exe, append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "KVALLOC_TEST_DAEMON=1")
	log := &lockedBuffer{}
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

// waitExit waits for cmd's exit, at most 30 s, and returns its status.
func waitExit(t *testing.T, cmd *exec.Cmd, log *lockedBuffer) *os.ProcessState {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit in 30 s:\n%s", cmd.Args, log.String())
	}
	return cmd.ProcessState
}

// served connects to sock and checks that key is there; it returns the
// epoch served.
func served(t *testing.T, sock string, key l1.ObjectKey) uint64 {
	t.Helper()
	c, err := client.Dial(sock, client.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("nothing serves %s: %v", sock, err)
	}
	defer c.Close()
	rs, err := c.ReserveRead([]l1.ObjectKey{key}, 1)
	if err != nil || rs[0].Status != wire.StatusOK {
		t.Fatalf("%v after the handoff: %v %v", key, rs, err)
	}
	return c.Epoch()
}

// TestTakeoverExitStatus: kvallocd -takeover takes the pool over and the
// old kvallocd exits 0; a successor that cannot serve (its -metrics
// address is taken) exits 1 and the daemon serving goes on serving its
// objects under its epoch, until SIGTERM (exit 0).
func TestTakeoverExitStatus(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "k.sock")
	args := []string{"-socket", sock, "-pool-size", "32MiB", "-segment-size", "8MiB", "-populate=false"}
	a, alog := daemonLog(t, args...)
	waitSocket(t, sock)
	c, err := client.Dial(sock, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key := l1.ObjectKey{ChunkHash: "kept", Model: "m"}
	rs, err := c.ReserveWrite([]l1.ObjectKey{key}, nil, 4096, l1.ModeAll)
	if err != nil || rs[0].Status != wire.StatusOK {
		t.Fatal(rs, err)
	}
	if sts, err := c.FinishWrite([]l1.ObjectKey{key}, []client.Lease{rs[0].Lease}); err != nil || sts[0] != wire.StatusOK {
		t.Fatal(sts, err)
	}
	epochA := c.Epoch()
	c.Close()

	b, blog := daemonLog(t, append(args, "-takeover")...)
	if st := waitExit(t, a, alog); st.ExitCode() != 0 {
		t.Fatalf("the old kvallocd, handed off, exited %v:\n%s", st, alog.String())
	}
	epochB := served(t, sock, key)
	if epochB == epochA {
		t.Fatalf("the successor serves the old epoch %#x", epochA)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cmd, clog := daemonLog(t, append(args, "-takeover", "-metrics", taken.Addr().String())...)
	if st := waitExit(t, cmd, clog); st.ExitCode() != 1 {
		t.Fatalf("a successor that cannot serve exited %v, want 1:\n%s", st, clog.String())
	}
	if got := served(t, sock, key); got != epochB {
		t.Fatalf("after a failed takeover epoch %#x is served, not the daemon's %#x:\n%s", got, epochB, blog.String())
	}
	if b.ProcessState != nil {
		t.Fatalf("the daemon ended at a failed takeover: %v", b.ProcessState)
	}
	b.Process.Signal(syscall.SIGTERM)
	if st := waitExit(t, b, blog); st.ExitCode() != 0 {
		t.Fatalf("SIGTERM: exit %v:\n%s", st, blog.String())
	}
}
