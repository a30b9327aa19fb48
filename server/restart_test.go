//go:build linux

package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// Late clients: a writer and a reader whose processes outlive their
// connection across a restart of the daemon, and keep copying into and
// out of their mapping of the pool after it. The restart must keep their
// blocks from every other writer until their leases lapse.

const lateBlock = 16 << 20 // one object fills one block

// lateFill is the byte each key's object is filled with.
func lateFill(k l1.ObjectKey) byte { return byte(stampOf(k)>>8) | 1 }

// lateKey is a key of the late-client tests.
func lateKey(s string) l1.ObjectKey { return l1.ObjectKey{ChunkHash: s, Model: "late"} }

// lateClient is a client process in role "latewriter" (it reserves
// KVALLOC_LATE_KEY, says "reserved", and at "write" on stdin fills its
// whole block, says "wrote", then tries finish_write and says how it
// ended) or "latereader" (it read-locks the key, says "locked", and at
// "check" on stdin counts the bytes of its block that are not the key's
// fill, says "wrong <n>").
func lateClient(role string) int {
	c, err := client.Dial(os.Getenv(childSocket), client.Options{Timeout: 10 * time.Second})
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	k := lateKey(os.Getenv("KVALLOC_LATE_KEY"))
	var res []client.Result
	if role == "latewriter" {
		res, err = c.ReserveWrite([]l1.ObjectKey{k}, nil, lateBlock, l1.ModeAll)
	} else {
		res, err = c.ReserveRead([]l1.ObjectKey{k}, 1)
	}
	if err != nil || res[0].Status != wire.StatusOK {
		fmt.Println("lock:", err, res)
		return 1
	}
	b, err := c.Bytes(res[0].Block)
	if err != nil {
		fmt.Println("bytes:", err)
		return 1
	}
	if role == "latewriter" {
		fmt.Println("reserved")
	} else {
		fmt.Println("locked")
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch in.Text() {
		case "write": // after the restart: late bytes
			for i := range b {
				b[i] = lateFill(k)
			}
			fmt.Println("wrote")
			_, err := c.FinishWrite([]l1.ObjectKey{k}, []client.Lease{res[0].Lease})
			fmt.Println("finish:", err)
		case "check":
			n := len(b) - bytes.Count(b, []byte{lateFill(k)})
			fmt.Println("wrong", n)
		}
	}
	return 0
}

// lateProc is a late client process and its stdin.
type lateProc struct {
	cmd   *exec.Cmd
	in    *os.File
	lines <-chan string
}

// startLate starts a late client process in role, with the Go client
// (kind "go": this test binary) or the Python one (kind "python":
// testdata/late_client.py over python/kvalloc; python3 or $PYTHON must
// be there).
func startLate(t *testing.T, kind, role, sock, key string) *lateProc {
	t.Helper()
	var cmd *exec.Cmd
	if kind == "python" {
		py := os.Getenv("PYTHON")
		if py == "" {
			py = "python3"
		}
		if _, err := exec.LookPath(py); err != nil {
			t.Fatalf("the Python late client needs %s (set $PYTHON): %v", py, err)
		}
		cmd = exec.Command(py, "testdata/late_client.py", role, sock, key, strconv.Itoa(int(lateFill(lateKey(key)))))
	} else {
		exe, err := os.Executable()
		require.NoError(t, err)
		cmd = exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childRole+"="+role, childSocket+"="+sock, "KVALLOC_LATE_KEY="+key)
	}
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdin = r
	cmd, lines := startChild(t, cmd)
	r.Close()
	t.Cleanup(func() { w.Close() })
	return &lateProc{cmd: cmd, in: w, lines: lines}
}

// fillKey writes key's fill over a whole block and finishes it.
func fillKey(c *client.Client, k l1.ObjectKey) (wire.Status, error) {
	rs, err := c.ReserveWrite([]l1.ObjectKey{k}, nil, lateBlock, l1.ModeAll)
	if err != nil {
		return 0, err
	}
	if rs[0].Status != wire.StatusOK {
		return rs[0].Status, nil
	}
	b, err := c.Bytes(rs[0].Block)
	if err != nil {
		return 0, err
	}
	for i := range b {
		b[i] = lateFill(k)
	}
	sts, err := c.FinishWrite([]l1.ObjectKey{k}, []client.Lease{rs[0].Lease})
	if err != nil {
		return 0, err
	}
	return sts[0], nil
}

// wrongBytes read-locks k and counts the bytes that are not its fill; -1
// when it is not there.
func wrongBytes(c *client.Client, k l1.ObjectKey) (int, error) {
	rs, err := c.ReserveRead([]l1.ObjectKey{k}, 1)
	if err != nil {
		return 0, err
	}
	if rs[0].Status != wire.StatusOK {
		return -1, nil
	}
	b, err := c.Bytes(rs[0].Block)
	if err != nil {
		return 0, err
	}
	n := len(b) - bytes.Count(b, []byte{lateFill(k)})
	_, err = c.FinishRead([]l1.ObjectKey{k}, []client.Lease{rs[0].Lease}, 1)
	return n, err
}

// lateReport is what runLate counted.
type lateReport struct {
	writers, readers int // late clients that copied after the restart
	wrong            int // bytes: the readers' own and the next writer's objects'
	refused          int // reservations the new daemon refused for want of room
}

// runLate runs the scenario over route "handoff" or "fdstore", with daemon
// processes that carry the restart bite when bite is set. The pool has 3
// blocks: a finished object a late reader holds, a block a late writer
// reserved, and a finished object nobody holds. After the restart the
// test process stores two objects of a block each, read-locking each once
// stored: the first must take the free object's block, the second must be
// refused (the other two blocks are a live lease's). Then the late writer fills its block, the
// late reader checks its own, and the test reads back what it stored.
func runLate(t *testing.T, route, kind string, bite bool) lateReport {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kvallocd.sock")
	env := []string{"KVALLOC_HO_POOL=" + strconv.Itoa(3*lateBlock)}
	if bite {
		env = append(env, "KVALLOC_HO_RELEASE_BITE=1")
	}
	var f *fakeSystemd
	var a *hoDaemon
	if route == "fdstore" {
		f = newFakeSystemd(t, dir)
		a = startUnitEnv(t, f, sock, env, nil)
		f.until(t, "READY=1 and the pool", func() bool { return f.ready == 1 && len(f.store["pool"]) == 1 })
	} else {
		exe, err := os.Executable()
		require.NoError(t, err)
		var derr error
		a, derr = startHandoffdEnv(t, exe, sock, false, env)
		require.NoError(t, derr)
	}
	c, err := client.Dial(sock, client.Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	k0, k1 := lateKey("read-held"), lateKey("free")
	for _, k := range []l1.ObjectKey{k0, k1} {
		st, err := fillKey(c, k)
		require.NoError(t, err)
		require.Equal(t, wire.StatusOK, st)
	}
	c.Close()
	r := startLate(t, kind, "latereader", sock, k0.ChunkHash)
	expect(t, r.lines, "locked")
	w := startLate(t, kind, "latewriter", sock, "write-held")
	expect(t, w.lines, "reserved")

	// The restart.
	var b *hoDaemon
	if route == "fdstore" {
		a.cmd.Process.Signal(syscall.SIGTERM)
		<-a.exited
		f.until(t, "the index", func() bool { return len(f.store["index"]) == 1 })
		b = startUnitEnv(t, f, sock, env, f.files(t, "pool", "index"), "pool", "index")
		require.Equal(t, "fdstore", b.how, b.why)
	} else {
		exe, err := os.Executable()
		require.NoError(t, err)
		var derr error
		b, derr = startHandoffdEnv(t, exe, sock, true, env)
		require.NoError(t, derr)
		require.NoError(t, b.wait())
		require.Equal(t, "handoff", b.how, b.why)
		<-a.exited
	}
	c, err = client.Dial(sock, client.Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, b.epoch, c.Epoch())
	var rep lateReport
	next := []l1.ObjectKey{lateKey("next-1"), lateKey("next-2")}
	var stored []l1.ObjectKey
	for _, k := range next {
		st, err := fillKey(c, k)
		require.NoError(t, err)
		switch st {
		case wire.StatusOK:
			stored = append(stored, k)
			// Pinned, so that the next reservation cannot evict it.
			rs, err := c.ReserveRead([]l1.ObjectKey{k}, 1)
			require.NoError(t, err)
			require.Equal(t, wire.StatusOK, rs[0].Status)
		case wire.StatusOutOfMemory:
			rep.refused++
		default:
			t.Fatalf("reserving %v: %v", k, st)
		}
	}
	// The late copies.
	fmt.Fprintln(w.in, "write")
	expect(t, w.lines, "wrote")
	rep.writers++
	fmt.Fprintln(r.in, "check")
	l := expect(t, r.lines, "wrong ")
	n, err := strconv.Atoi(strings.TrimPrefix(l, "wrong "))
	require.NoError(t, err)
	rep.readers++
	rep.wrong += n
	for _, k := range stored {
		n, err := wrongBytes(c, k)
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 0, "%v, stored, is gone", k)
		rep.wrong += n
	}
	t.Logf("%s restart, %s clients: %d late writer and %d late reader copied after it; %d wrong bytes (the reader's block and the %d objects stored after it); %d reservations refused for room",
		route, kind, rep.writers, rep.readers, rep.wrong, len(stored), rep.refused)
	return rep
}

// TestRestartKeepsLateClientsBlocks: over a handoff and over systemd's fd
// store, with the Go client and with the Python one, a writer between its reserve_write and its finish_write, and a
// reader under a read lock, both in processes of their own that outlive
// their connection and copy after the restart, find their blocks theirs:
// the next writer gets the one free object's block, and is refused a
// second (the two others are under live leases); 0 wrong bytes.
func TestRestartKeepsLateClientsBlocks(t *testing.T) {
	for _, route := range []string{"handoff", "fdstore"} {
		for _, kind := range []string{"go", "python"} {
			t.Run(route+"/"+kind, func(t *testing.T) {
				rep := runLate(t, route, kind, false)
				require.Equal(t, 0, rep.wrong, "wrong bytes after the %s", route)
				require.Equal(t, 1, rep.refused, "the second reservation took a block under a live lease")
			})
		}
	}
}

// TestRestartKeepsLateClientsBlocksBites: against daemons whose restart
// releases its connections' leases (as every restart did), the late
// clients' copies land in the next writer's objects, or the next writer's
// in the late reader's block.
func TestRestartKeepsLateClientsBlocksBites(t *testing.T) {
	for _, route := range []string{"handoff", "fdstore"} {
		t.Run(route, func(t *testing.T) {
			rep := runLate(t, route, "go", true)
			if rep.wrong == 0 {
				t.Fatalf("the %s restart released live leases and no byte went wrong", route)
			}
			t.Logf("caught: %d wrong bytes", rep.wrong)
		})
	}
}
