//go:build linux

package server_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// The uids of the squatting tests: the daemon's user, who has no
// $XDG_RUNTIME_DIR, and another local user.
const (
	victimUID   = 65533
	attackerUID = 65534
)

// Child roles of this file (see TestMain).

// daemonChild runs a daemon on the socket path ("" for the default) and
// prints "serving <path>" until SIGTERM, or "new: <error>".
func daemonChild(path string) int {
	s, err := server.New(server.Config{SocketPath: path, PoolSize: 16 << 20})
	if err != nil {
		fmt.Println("new:", err)
		return 0
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	fmt.Println("serving", s.SocketPath())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	s.Close()
	<-done
	return 0
}

// defaultPathChild prints wire.DefaultSocketPath as this process sees it.
func defaultPathChild() int {
	fmt.Println("default", wire.DefaultSocketPath())
	return 0
}

// impostor squats the socket path: it makes the path's directory when
// missing (mode 0755, so that the victim reaches the socket), listens on
// the path, and takes the lock file as KVALLOC_TEST_LOCK says: "symlink"
// plants a symlink to <path>.planted, "flock" holds an flock on a file of
// its own. It prints "squatting", then for each connection, once its peer
// closes, "got <n> bytes from uid <uid>".
func impostor(path string) int {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			fmt.Println("mkdir:", err)
			return 1
		}
		os.Chmod(dir, 0o755)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	os.Chmod(path, 0o777)
	switch os.Getenv("KVALLOC_TEST_LOCK") {
	case "symlink":
		if err := os.Symlink(path+".planted", path+".lock"); err != nil {
			fmt.Println("symlink:", err)
			return 1
		}
	case "flock":
		f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o644)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		}
		if err != nil {
			fmt.Println("flock:", err)
			return 1
		}
	}
	fmt.Println("squatting")
	for {
		c, err := ln.Accept()
		if err != nil {
			return 1
		}
		go func() {
			defer c.Close()
			uid := -1
			if raw, err := c.(*net.UnixConn).SyscallConn(); err == nil {
				raw.Control(func(fd uintptr) {
					if cr, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
						uid = int(cr.Uid)
					}
				})
			}
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			n, _ := io.Copy(io.Discard, c)
			fmt.Printf("got %d bytes from uid %d\n", n, uid)
		}()
	}
}

// runAs starts the test binary bin in role as uid (gid the same), with
// env added to this process's environment less $XDG_RUNTIME_DIR and
// $TMPDIR.
func runAs(t *testing.T, bin, role string, uid uint32, socket string, env ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	var base []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(e, "TMPDIR=") {
			base = append(base, e)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(append(base, childRole+"="+role, childSocket+"="+socket), env...)
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	return startChild(t, cmd)
}

// squatSetup makes a shared directory like /tmp (root's, mode 1777) and a
// copy of the test binary that other uids can run.
func squatSetup(t *testing.T) (shared, bin string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the squatting tests run processes as other uids: run them as root")
	}
	top, err := os.MkdirTemp("", "kvalloc-squat-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(top) })
	shared = filepath.Join(top, "tmp")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{top, 0o755}, {shared, 0o777 | os.ModeSticky}} {
		if err := os.MkdirAll(d.path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	exe, _ := os.Executable()
	bin = filepath.Join(top, "child.test")
	copyFile(t, exe, bin)
	return shared, bin
}

// gotNothing checks that the impostor's connection from uid got no byte.
func gotNothing(t *testing.T, lines <-chan string, uid int) {
	t.Helper()
	want := fmt.Sprintf("bytes from uid %d", uid)
	for {
		l := expect(t, lines, "got ")
		if strings.HasSuffix(l, want) {
			if l != "got 0 bytes from uid "+strconv.Itoa(uid) {
				t.Fatalf("the impostor: %q: the client sent it bytes", l)
			}
			return
		}
	}
}

// TestDefaultPathSquatted: another local user squats the default socket
// path of a daemon user without $XDG_RUNTIME_DIR (its directory in a
// shared /tmp, a listener on the path, the lock file, as a symlink or
// flock'ed). The daemon refuses to start, with an error that names the
// other uid; its user's client, on the default path, refuses the impostor
// with an error that names both uids, and sends it nothing. Without the
// squat, the same daemon and client work on the default path, in a
// directory of mode 0700 the daemon made.
func TestDefaultPathSquatted(t *testing.T) {
	shared, bin := squatSetup(t)
	tmp := "TMPDIR=" + shared
	cmd, lines := runAs(t, bin, "defaultpath", victimUID, "", tmp)
	path := strings.TrimPrefix(expect(t, lines, "default "), "default ")
	cmd.Wait()
	if !strings.HasPrefix(path, shared+"/") {
		t.Fatalf("the default path %s is not in $TMPDIR %s", path, shared)
	}
	for _, lock := range []string{"symlink", "flock"} {
		t.Run(lock, func(t *testing.T) {
			imp, ilines := runAs(t, bin, "impostor", attackerUID, path, "KVALLOC_TEST_LOCK="+lock)
			expect(t, ilines, "squatting")
			defer func() {
				imp.Process.Kill()
				imp.Wait()
				if filepath.Dir(path) != shared {
					os.RemoveAll(filepath.Dir(path))
				}
				os.Remove(path)
				os.Remove(path + ".lock")
				os.Remove(path + ".planted")
			}()
			d, dlines := runAs(t, bin, "daemon", victimUID, "", tmp)
			line := expect(t, dlines, "")
			d.Wait()
			if !strings.HasPrefix(line, "new: ") {
				t.Fatalf("the daemon started on a squatted default path: %q", line)
			}
			for _, w := range []string{"unsafe socket path", "uid 65534", "uid 65533"} {
				if !strings.Contains(line, w) {
					t.Errorf("the daemon's refusal %q does not say %q", line, w)
				}
			}
			if _, err := os.Lstat(path + ".planted"); err == nil {
				t.Error("the daemon created the file the symlinked lock pointed to")
			}
			c, clines := runAs(t, bin, "dialer", victimUID, "", tmp)
			line = expect(t, clines, "")
			c.Wait()
			for _, w := range []string{"refused: ", "untrusted uid", path, "uid 65534", "(uid 65533)"} {
				if !strings.Contains(line, w) {
					t.Fatalf("the client's refusal %q does not say %q", line, w)
				}
			}
			gotNothing(t, ilines, victimUID)
		})
	}
	// Unsquatted, the daemon makes its private directory and serves.
	d, dlines := runAs(t, bin, "daemon", victimUID, "", tmp)
	if l := expect(t, dlines, ""); l != "serving "+path {
		t.Fatalf("the daemon on the default path: %q", l)
	}
	defer func() { d.Process.Signal(syscall.SIGTERM); d.Wait() }()
	fi, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || fi.Mode().Perm() != 0o700 || st.Uid != victimUID {
		t.Fatalf("the default directory: mode %v, uid %d", fi.Mode(), st.Uid)
	}
	c, clines := runAs(t, bin, "dialer", victimUID, "", tmp)
	if l := expect(t, clines, ""); l != "connected" {
		t.Fatalf("the daemon's own user: %q", l)
	}
	c.Wait()
}

// TestSharedPathSquatted: a daemon told to listen in a directory that
// other users can write (the old default, /tmp/kvallocd-<uid>.sock) finds
// another uid there, listening on the path and holding the lock: it
// refuses the directory (not "in use"), and a root client refuses the
// impostor with an error that names both uids, before it sends anything.
func TestSharedPathSquatted(t *testing.T) {
	shared, bin := squatSetup(t)
	path := filepath.Join(shared, "kvallocd-0.sock")
	imp, ilines := runAs(t, bin, "impostor", attackerUID, path, "KVALLOC_TEST_LOCK=flock")
	expect(t, ilines, "squatting")
	defer func() { imp.Process.Kill(); imp.Wait() }()
	_, err := server.New(server.Config{SocketPath: path, PoolSize: 1 << 20})
	if !errors.Is(err, server.ErrUnsafePath) || !strings.Contains(err.Error(), shared) {
		t.Errorf("a daemon in a directory all can write: %v", err)
	}
	_, err = client.Dial(path, client.Options{Timeout: 2 * time.Second})
	if !errors.Is(err, client.ErrUntrustedDaemon) {
		t.Fatalf("the client dialled the impostor: %v", err)
	}
	for _, w := range []string{path, "uid 65534", "(uid 0)"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the client's refusal %q does not say %q", err, w)
		}
	}
	gotNothing(t, ilines, 0)
	// Told to trust the uid, the client talks to it.
	_, err = client.Dial(path, client.Options{Timeout: 200 * time.Millisecond, DaemonUIDs: []uint32{attackerUID}})
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a client that trusts uid %d: %v", attackerUID, err)
	}
	if l := expect(t, ilines, "got "); l == "got 0 bytes from uid 0" {
		t.Fatalf("the client that trusts the impostor sent it nothing: %q", l)
	}
}

// TestSocketDirRefused: a socket directory that another user owns or can
// write, or a lock file that is a symlink or another user's, is refused
// with ErrUnsafePath, and nothing is created.
func TestSocketDirRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(dir string) error
		want  string
	}{
		{"dir 0777", func(d string) error { return os.Chmod(d, 0o777) }, "other users can write it"},
		{"dir 1777", func(d string) error { return os.Chmod(d, 0o777|os.ModeSticky) }, "other users can write it"},
		{"dir 0770", func(d string) error { return os.Chmod(d, 0o770) }, "other users can write it"},
		{"dir of another uid", func(d string) error { return os.Chown(d, attackerUID, attackerUID) }, "owned by uid 65534"},
		{"parent of another uid", func(d string) error { return os.Chown(filepath.Dir(d), attackerUID, attackerUID) }, "owned by uid 65534"},
		{"lock symlink", func(d string) error {
			return os.Symlink(filepath.Join(d, "planted"), filepath.Join(d, "k.sock.lock"))
		}, "is a symlink"},
		{"lock of another uid", func(d string) error {
			f := filepath.Join(d, "k.sock.lock")
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				return err
			}
			return os.Chown(f, attackerUID, attackerUID)
		}, "uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if os.Geteuid() != 0 {
				t.Fatal("needs root to chown to another uid")
			}
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "k.sock")
			s, err := server.New(server.Config{SocketPath: path, PoolSize: 1 << 20})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, server.ErrUnsafePath) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want ErrUnsafePath saying %q", err, tc.want)
			}
			for _, f := range []string{"planted", "k.sock"} {
				if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
					t.Fatalf("%s was created", f)
				}
			}
		})
	}
}

// TestSocketViaSymlinkedDir: a socket path through a symlink is served in
// the directory the symlink names when that directory is safe.
func TestSocketViaSymlinkedDir(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	s := start(t, server.Config{SocketPath: filepath.Join(link, "k.sock")})
	if fi, err := os.Lstat(filepath.Join(real, "k.sock")); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("no socket in the symlink's target: %v", err)
	}
	c := dial(t, s)
	c.Close()
}

// TestClientErrorsNamePath: a client's transport errors, at Dial and in a
// call, name the socket's path, never the temporary name the daemon bound
// its socket under before renaming it there.
func TestClientErrorsNamePath(t *testing.T) {
	exe, _ := os.Executable()
	path := filepath.Join(t.TempDir(), "k.sock")
	d, lines := runAs(t, exe, "daemon", 0, path)
	if l := expect(t, lines, "serving"); l != "serving "+path {
		t.Fatalf("daemon: %q", l)
	}
	defer func() { d.Process.Signal(syscall.SIGCONT); d.Process.Kill(); d.Wait() }()
	c, err := client.Dial(path, client.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d.Process.Signal(syscall.SIGSTOP)
	waitStopped(t, d.Process.Pid)
	_, err = c.Stats()
	named(t, "a call", err, path)
	_, err = client.Dial(path, client.Options{Timeout: 300 * time.Millisecond})
	named(t, "Dial", err, path)
}

func named(t *testing.T, what string, err error, path string) {
	t.Helper()
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.Is(err, client.ErrDisconnected) {
		t.Fatalf("%s to a stopped daemon: %v", what, err)
	}
	if msg := err.Error(); !strings.Contains(msg, path) || strings.Contains(msg, ".k.sock.") {
		t.Fatalf("%s: %q does not name %s alone", what, msg, path)
	}
}

// waitStopped waits until process pid is stopped (state T).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
	t.Fatalf("process %d not stopped after 10 s", pid)
}
