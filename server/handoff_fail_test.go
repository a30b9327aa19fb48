//go:build linux

package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// A handoff that fails must leave a daemon serving: the old one serves on
// until its successor says it serves, and a daemon ends with status 0 only
// when a successor took its pool or it was told to stop. The tests run the
// daemons under a supervisor with the shipped unit's policy,
// Restart=on-failure (dist/systemd/kvallocd.service): a daemon that exits
// nonzero or by a signal is started again; one that exits 0 is not.

// supervisor keeps one daemon process running under Restart=on-failure.
type supervisor struct {
	launch func() (*hoDaemon, error)
	mu     sync.Mutex
	cur    *hoDaemon
	starts int
	exits  []string // how each daemon it ran ended
	ended  chan struct{}
}

// supervise starts a daemon with launch and restarts it after each exit
// that is a failure, as systemd does under Restart=on-failure.
func supervise(t *testing.T, launch func() (*hoDaemon, error)) *supervisor {
	t.Helper()
	s := &supervisor{launch: launch, ended: make(chan struct{})}
	d, err := launch() // it waits until the daemon serves
	require.NoError(t, err)
	s.cur, s.starts = d, 1
	go func() {
		defer close(s.ended)
		for {
			<-d.exited
			st := d.cmd.ProcessState
			s.mu.Lock()
			s.exits = append(s.exits, st.String())
			s.mu.Unlock()
			if st.ExitCode() == 0 {
				return // Restart=on-failure: an exit 0 is a clean stop
			}
			time.Sleep(100 * time.Millisecond) // RestartSec
			nd, err := launch()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.cur, s.starts = nd, s.starts+1
			s.mu.Unlock()
			d = nd
		}
	}()
	t.Cleanup(func() {
		s.mu.Lock()
		d := s.cur
		s.mu.Unlock()
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.ended:
		case <-time.After(20 * time.Second):
		}
	})
	return s
}

func (s *supervisor) state() (cur *hoDaemon, starts int, exits []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.starts, append([]string(nil), s.exits...)
}

// servedStamps connects to sock (waiting up to 20 s for a daemon) and
// reads ks back; it returns the epoch served and an error when nothing
// serves or a stamp is wrong.
func servedStamps(sock string, ks []l1.ObjectKey) (uint64, error) {
	var c *client.Client
	var err error
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(20 * time.Millisecond) {
		if c, err = client.Dial(sock, client.Options{Timeout: 10 * time.Second}); err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("nothing serves %s: %w", sock, err)
	}
	defer c.Close()
	rs, err := c.ReserveRead(ks, 1)
	if err != nil {
		return 0, err
	}
	for i, r := range rs {
		if r.Status != wire.StatusOK {
			return c.Epoch(), fmt.Errorf("%v: %v", ks[i], r.Status)
		}
		b, err := c.Bytes(r.Block)
		if err != nil {
			return 0, err
		}
		if binary.LittleEndian.Uint64(b) != stampOf(ks[i]) {
			return c.Epoch(), fmt.Errorf("%v: wrong stamp", ks[i])
		}
	}
	return c.Epoch(), nil
}

// failedHandoff runs one handoff whose successor dies at point (or, for
// "stopped", one asked of an old daemon stopped by SIGSTOP, whose
// successor gives up), by route "takeover" (the operator runs kvallocd
// -takeover) or "reload" (the unit's ExecReload, under systemd's
// notification socket and fd store), with the old daemon under a
// supervisor. It returns an error when, after it, nothing serves the
// socket, or a daemon other than the old one serves it, or the objects
// are gone.
func failedHandoff(t *testing.T, route, point string, bite bool) error {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kvallocd.sock")
	exe, err := os.Executable()
	require.NoError(t, err)
	var env []string
	if route == "reload" {
		f := newFakeSystemd(t, dir)
		env = append(env, "KVALLOC_HO_SYSTEMD=1", "NOTIFY_SOCKET="+f.path)
	}
	oldEnv := env
	if bite {
		oldEnv = append(oldEnv, "KVALLOC_HO_COMMIT_BITE=1")
	}
	sup := supervise(t, func() (*hoDaemon, error) {
		return startHandoffdEnv(t, exe, sock, false, oldEnv)
	})
	a, _, _ := sup.state()
	c, err := client.Dial(sock, client.Options{})
	require.NoError(t, err)
	ks := keys("failed-"+point, 20)
	putStamped(t, c, ks, handoffObject)
	c.Close()

	newEnv := append([]string{}, env...)
	if point == "stopped" {
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
		newEnv = append(newEnv, "KVALLOC_HO_DIAL_TIMEOUT=1s")
	} else {
		newEnv = append(newEnv, "KVALLOC_HO_DIE_AT="+point)
	}
	b, err := startHandoffdEnv(t, exe, sock, true, newEnv)
	require.NoError(t, err)
	select {
	case <-b.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the successor (%s) did not end", point)
	}
	st := b.cmd.ProcessState
	if point == "stopped" {
		if st.ExitCode() == 0 {
			t.Errorf("the successor that gave up exited 0")
		}
		require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
		// The resumed old daemon finds the request the successor left and
		// fails to answer it: what it does then (serve on, or exit) is
		// what is checked, so wait for it, not for the machine's pace.
		if err := handoffFailedSeen(a); err != nil {
			return err
		}
	} else if ws, ok := st.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the successor was to die by SIGKILL at %q; it ended %v", point, st)
	}
	epoch, err := servedStamps(sock, ks)
	cur, starts, exits := sup.state()
	t.Logf("%s, successor dead at %q: served epoch %#x (the old daemon's %#x), daemon starts %d, exits %q: %v", route, point, epoch, a.epoch, starts, exits, err)
	switch {
	case err != nil:
		return err
	case epoch != a.epoch || cur != a || starts != 1:
		return fmt.Errorf("the old daemon did not serve on: epoch %#x served, the old daemon's %#x; %d starts, exits %q", epoch, a.epoch, starts, exits)
	}
	select {
	case <-a.exited:
		return errors.New("the old daemon exited")
	default:
	}
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGTERM))
	<-a.exited
	require.Equal(t, 0, a.cmd.ProcessState.ExitCode(), "a SIGTERM after the failed handoff")
	return nil
}

// handoffFailedSeen waits for d's log line of a failed or refused
// handoff (the resumed daemon judges the request about 5 s after its
// SIGCONT), or its exit, for up to a minute (a hang guard, not a
// deadline of the check).
func handoffFailedSeen(d *hoDaemon) error {
	guard := time.After(time.Minute)
	for {
		select {
		case l := <-d.lines:
			if strings.Contains(l, "handoff failed:") || strings.Contains(l, "handoff refused or failed") {
				return nil
			}
		case <-d.exited:
			return nil
		case <-guard:
			return errors.New("the resumed old daemon logged no failed handoff in a minute")
		}
	}
}

var failPoints = []string{"asked", "transfer", "ready", "go", "stopped"}

// bitePoints are the points the bites run at: one before the transfer's
// answer, and the stopped old daemon (each bite waits 20 s for a daemon
// that never comes).
var bitePoints = []string{"ready", "stopped"}

// TestHandoffFailedOldServesOn: by both routes, a successor that dies at
// any point before it says it serves (after asking, after the transfer,
// after its ready, after the old daemon's go), or one that gives up on an
// old daemon stopped by SIGSTOP (and exits nonzero), leaves the old daemon
// serving its objects under its epoch; it exits 0 only at the SIGTERM.
func TestHandoffFailedOldServesOn(t *testing.T) {
	for _, route := range []string{"takeover", "reload"} {
		for _, p := range failPoints {
			t.Run(route+"/"+p, func(t *testing.T) {
				require.NoError(t, failedHandoff(t, route, p, false))
			})
		}
	}
}

// TestHandoffFailedOldServesOnBites: against old daemons that a begun
// handoff ends with status 0 (as every handoff did), the supervisor does
// not restart them and nothing serves: caught at every point.
func TestHandoffFailedOldServesOnBites(t *testing.T) {
	for _, p := range bitePoints {
		t.Run(p, func(t *testing.T) {
			err := failedHandoff(t, "takeover", p, true)
			if err == nil {
				t.Fatalf("a handoff failed at %q, the old daemon exited 0, and the test passed", p)
			}
			t.Logf("caught: %v", err)
		})
	}
}

// takeoverFromOtherUID starts a daemon of uid 65534 with Takeover on a
// socket whose handoff path a process of root listens on (as a daemon of
// another user would), and returns how the daemon started, why, and
// whether the listener got a handoff request. The daemon gets the uid
// bite when bite is set.
func takeoverFromOtherUID(t *testing.T, bite bool) (how, why string, asked bool) {
	dir, err := os.MkdirTemp("", "kvalloc-uid-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "child.test")
	exe, err := os.Executable()
	require.NoError(t, err)
	copyFile(t, exe, bin)
	sub := filepath.Join(dir, "run")
	require.NoError(t, os.Mkdir(sub, 0o755))
	require.NoError(t, os.Chown(sub, 65534, 65534))
	sock := filepath.Join(sub, "kvallocd.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: server.HandoffPath(sock), Net: "unix"})
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, os.Chmod(server.HandoffPath(sock), 0o666))
	got := make(chan bool, 1)
	go func() {
		c, err := ln.AcceptUnix()
		if err != nil {
			got <- false
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var req [16]byte
		_, err = io.ReadFull(c, req[:])
		got <- err == nil && binary.LittleEndian.Uint32(req[:]) == 0x4f48564b
	}()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRole+"=handoffd", childSocket+"="+sock, "KVALLOC_HO_TAKEOVER=true",
		"KVALLOC_HO_POOL="+strconv.Itoa(16<<20))
	if bite {
		cmd.Env = append(cmd.Env, "KVALLOC_HO_UID_BITE=1")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	d, err := launchHandoffd(t, cmd)
	require.NoError(t, err)
	require.NoError(t, d.wait())
	ln.Close() // the accept ends, if it is still waiting
	asked = <-got
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	return d.how, d.why, asked
}

// TestTakeoverChecksUID: a daemon of uid 65534 asked to take over finds a
// process of root on its handoff path: it asks nothing of it, and starts
// cold, saying why.
func TestTakeoverChecksUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs a daemon as uid 65534: it needs root")
	}
	how, why, asked := takeoverFromOtherUID(t, false)
	require.False(t, asked, "the daemon asked a process of another uid for its pool")
	require.Equal(t, "cold", how)
	require.Contains(t, why, "not of this daemon's uid 65534")
}

// TestTakeoverChecksUIDBites: a daemon that skips the check asks root's
// process for its pool.
func TestTakeoverChecksUIDBites(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs a daemon as uid 65534: it needs root")
	}
	_, why, asked := takeoverFromOtherUID(t, true)
	if !asked {
		t.Fatalf("a daemon without the uid check did not ask (started cold: %s)", why)
	}
	t.Logf("caught: the daemon asked uid 0's process for its pool (then: %s)", why)
}
