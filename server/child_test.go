//go:build linux

package server_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
)

// The test binary runs itself as a client process when KVALLOC_TEST_CHILD
// names a role, so that tests can kill a real process, or run one as
// another user. The child's socket path is KVALLOC_TEST_SOCKET; it writes
// one line per step to stdout.
const (
	childRole   = "KVALLOC_TEST_CHILD"
	childSocket = "KVALLOC_TEST_SOCKET"
)

func TestMain(m *testing.M) {
	switch os.Getenv(childRole) {
	case "":
		os.Exit(m.Run())
	case "holder":
		os.Exit(holder(os.Getenv(childSocket)))
	case "dialer":
		os.Exit(dialer(os.Getenv(childSocket)))
	case "daemon":
		os.Exit(daemonChild(os.Getenv(childSocket)))
	case "defaultpath":
		os.Exit(defaultPathChild())
	case "impostor":
		os.Exit(impostor(os.Getenv(childSocket)))
	case "killclient":
		os.Exit(killClient())
	case "killdaemon":
		os.Exit(killDaemon())
	case "handoffd":
		os.Exit(handoffd())
	case "handoffclient":
		os.Exit(handoffClient())
	case "limitdaemon":
		os.Exit(limitDaemon())
	case "holate":
		os.Exit(lateHarnessClient())
	case "latewriter", "latereader":
		os.Exit(lateClient(os.Getenv(childRole)))
	case "squatter":
		os.Exit(squatter(os.Getenv(childSocket)))
	default:
		fmt.Println("unknown role", os.Getenv(childRole))
		os.Exit(2)
	}
}

// holder connects, takes write reservations and read locks, reports
// "holding", and waits to be killed.
func holder(path string) int {
	c, err := client.Dial(path, client.Options{})
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	ws := keys("held-w", 4)
	if _, err := c.ReserveWrite(ws, nil, 1<<20, l1.ModeAll); err != nil {
		fmt.Println("reserve:", err)
		return 1
	}
	rs := keys("held-r", 3)
	if _, err := c.ReserveRead(rs, 2); err != nil {
		fmt.Println("read:", err)
		return 1
	}
	fmt.Println("holding")
	time.Sleep(time.Hour)
	return 0
}

// dialer connects and prints the outcome.
func dialer(path string) int {
	c, err := client.Dial(path, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		fmt.Println("refused:", err)
		return 0
	}
	c.Close()
	fmt.Println("connected")
	return 0
}

// child starts the test binary in role with the socket path, and returns
// the process and its stdout lines.
func child(t testing.TB, role, socket string, attr *syscall.SysProcAttr, exe string) (*exec.Cmd, <-chan string) {
	t.Helper()
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRole+"="+role, childSocket+"="+socket)
	cmd.SysProcAttr = attr
	return startChild(t, cmd)
}

// startChild starts cmd and returns its stdout lines; the process is
// killed at the end of the test if it still runs.
func startChild(t testing.TB, cmd *exec.Cmd) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, lines
}

// expect waits for a line with the prefix.
func expect(t testing.TB, lines <-chan string, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child ended before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			t.Logf("child: %s", l)
		case <-timeout:
			t.Fatalf("no %q from the child in 30 s", prefix)
		}
	}
}
