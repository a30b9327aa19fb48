//go:build linux

package server_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// The handoff harness: a daemon process (the test binary in role
// handoffd) serves 8 client processes (role handoffclient), each running
// cycles: one in ten reserves, stamps and finishes 4 new keys, the others
// read back a key it finished under the current epoch. The harness hands the pool off
// KVALLOC_HANDOFF_HANDOFFS times in a row (20 by default) to a new daemon
// process started with Takeover, once SIGKILLing the old daemon as soon
// as it logs that it is draining. After each handoff it reads back every
// key the clients had recorded as finished before the handoff began
// (each client appends a key to its file once its finish_write answered
// OK) and checks its stamps; a cold start (the SIGKILL's, if it landed
// before the transfer) voids the keys of the epochs before it, and the
// new daemon must say so. At the end each client reports its cycles, its
// reconnects, its calls that failed again after one reconnect, its wrong
// bytes and its own keys missing; the harness prints the counts and the
// time from each handoff's start (the new daemon's launch) to the first
// call a client got served by it, p50 and p99.
//
// Beside them run a late writer and a late reader (handoff_late_test.go):
// processes that hold a write reservation or a read lock across a
// restart and keep copying into or out of their block after their
// connection ended; the writer fills its whole block with its key's
// stamp, so a block reissued to another key shows in that key's stamps,
// and the reader checks its object's stamps. The harness prints their
// copies after a restart and the wrong bytes the reader saw, and fails
// on any wrong byte, or when no late copy happened. TestFDStoreHarness
// runs the same over systemd's fd store: each restart a SIGTERM (the
// daemon stores its index) and a start with the stored pool and index.
// (That a restart which gives those blocks away is caught is shown by
// TestRestartKeepsLateClientsBlocksBites, on a pool small enough that the
// next writer must get them: on the harness's 256 MiB pool the allocator
// carves new blocks from its largest free extent, so a freed 4 KiB block
// is seldom reissued within the late copies' 100 ms.)

const (
	handoffObject = 4096
	handoffBatch  = 4
	// handoffCap is the most keys one client writes over a run, so that
	// 8 clients fill half the pool at most. It is spent a share per
	// epoch: by its k-th epoch of a run of e, a client has written at
	// most handoffCap*k/e keys, then it only reads until the next
	// restart. A client that spent the whole cap early would write
	// nothing after a cold start, and every later check would hold no
	// object.
	handoffCap  = 4000
	handoffPool = 256 << 20
)

type hoDaemon struct {
	cmd    *exec.Cmd
	epoch  uint64
	how    string
	why    string
	exited chan struct{}
	lines  chan string  // its stderr log lines
	wait   func() error // until it serves
}

type hoReport struct {
	handoffs, killed                        int
	killedCold                              bool
	preserved, lost, wrong, voided          int // the last check's
	reads                                   int // every check's reads
	cycles, reconnects, failed, clientWrong int
	clientMissing                           int
	firstCall                               []time.Duration
	// lateCopies counts the late clients' copies after a restart ended
	// their connection (handoff_late_test.go); lateWrong the wrong bytes
	// they saw.
	lateCopies, lateWrong int
}

func TestHandoffHarness(t *testing.T) {
	if os.Getenv("KVALLOC_HANDOFF_HARNESS") == "0" || testing.Short() {
		t.Skip("KVALLOC_HANDOFF_HARNESS=0 or -short")
	}
	n := 20
	if v, err := strconv.Atoi(os.Getenv("KVALLOC_HANDOFF_HANDOFFS")); err == nil && v > 0 {
		n = v
	}
	rep, err := runHandoffs(t, 8, n, n/2, "handoff")
	reportHandoffs(t, "handoff harness", rep)
	if err != nil {
		t.Fatal(err)
	}
}

// reportHandoffs logs a harness's counts.
func reportHandoffs(t *testing.T, name string, rep *hoReport) {
	if rep != nil {
		pct := func(q float64) time.Duration {
			if len(rep.firstCall) == 0 {
				return 0
			}
			s := slices.Clone(rep.firstCall)
			slices.Sort(s)
			return s[min(len(s)-1, int(q*float64(len(s))))]
		}
		start := "warm (the transfer was out before the kill)"
		if rep.killedCold {
			start = "cold"
		}
		t.Logf("%s: %d restarts (%d by SIGKILL of the old daemon mid-handoff: the new one started %s); "+
			"objects preserved %d (every finished object of the last check; %d reads over all checks), lost %d, wrong bytes %d (voided by the cold start %d); "+
			"clients: %d cycles, %d reconnects, %d calls failed beyond one reconnect, %d wrong bytes, %d own keys missing; "+
			"late writer and reader: %d copies after a restart ended their connection, %d wrong bytes seen; "+
			"restart start to first call served p50 %v p99 %v",
			name, rep.handoffs, rep.killed, start, rep.preserved, rep.reads, rep.lost, rep.wrong, rep.voided,
			rep.cycles, rep.reconnects, rep.failed, rep.clientWrong, rep.clientMissing,
			rep.lateCopies, rep.lateWrong,
			pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond))
	}
}

// TestFDStoreHarness is the handoff harness over systemd's fd store: each
// restart is a SIGTERM of the daemon (it stores its index) and a start of
// the next with the stored pool and index, under a stand-in for systemd's
// manager; KVALLOC_HANDOFF_HANDOFFS restarts (20 by default).
func TestFDStoreHarness(t *testing.T) {
	if os.Getenv("KVALLOC_HANDOFF_HARNESS") == "0" || testing.Short() {
		t.Skip("KVALLOC_HANDOFF_HARNESS=0 or -short")
	}
	n := 20
	if v, err := strconv.Atoi(os.Getenv("KVALLOC_HANDOFF_HANDOFFS")); err == nil && v > 0 {
		n = v
	}
	rep, err := runHandoffs(t, 8, n, -1, "fdstore")
	reportHandoffs(t, "fd-store harness", rep)
	if err != nil {
		t.Fatal(err)
	}
}

// TestHandoffHarnessBites: against daemons whose index leaves out a
// hundredth of the objects, the harness fails at the first handoff.
func TestHandoffHarnessBites(t *testing.T) {
	if os.Getenv("KVALLOC_HANDOFF_HARNESS") == "0" || testing.Short() {
		t.Skip("with the harness")
	}
	t.Setenv("KVALLOC_HO_BITE", "1")
	_, err := runHandoffs(t, 2, 3, -1, "handoff")
	if err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("the harness passed daemons that drop objects at handoff: %v", err)
	}
	t.Logf("caught: %v", err)
}

// runHandoffs runs the harness: clients processes and a late writer and
// reader, handoffs restarts by route "handoff" (-takeover) or "fdstore"
// (a stop and a start under systemd's fd store), the one at index kill
// by SIGKILL (-1: none; handoffs only).
func runHandoffs(t *testing.T, clients, handoffs, kill int, route string) (*hoReport, error) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kvallocd.sock")
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	rep := &hoReport{}
	var f *fakeSystemd
	var d *hoDaemon
	if route == "fdstore" {
		f = newFakeSystemd(t, dir)
		d = startUnit(t, f, sock, nil)
	} else if d, err = startHandoffd(t, exe, sock, false); err != nil {
		return nil, err
	}
	epochFile := filepath.Join(dir, "epoch")
	setEpoch := func(e uint64) error { return os.WriteFile(epochFile, []byte(fmt.Sprintf("%#x\n", e)), 0o600) }
	if err := setEpoch(d.epoch); err != nil {
		return nil, err
	}
	epochs := []uint64{d.epoch}
	lostBefore := 0 // epochs[:lostBefore] were voided by a cold start
	type cl struct {
		cmd  *exec.Cmd
		out  chan string
		file string
		in   io.WriteCloser
	}
	var cls []*cl
	for i := range clients {
		c := &cl{file: filepath.Join(dir, fmt.Sprintf("client%d.keys", i)), out: make(chan string, 1024)}
		c.cmd = exec.Command(exe, "-test.run=^$")
		c.cmd.Env = append(os.Environ(), childRole+"=handoffclient", childSocket+"="+sock,
			"KVALLOC_HO_FILE="+c.file, "KVALLOC_HO_ID="+strconv.Itoa(i),
			"KVALLOC_HO_EPOCHS="+strconv.Itoa(handoffs+1))
		c.cmd.Stderr = os.Stderr
		c.in, _ = c.cmd.StdinPipe()
		out, _ := c.cmd.StdoutPipe()
		if err := c.cmd.Start(); err != nil {
			return nil, err
		}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				c.out <- sc.Text()
			}
			close(c.out)
		}()
		t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
		cls = append(cls, c)
	}
	// The late writer and reader.
	var lates []*cl
	for i, role := range []string{"writer", "reader"} {
		c := &cl{out: make(chan string, 1024)}
		c.cmd = exec.Command(exe, "-test.run=^$")
		c.cmd.Env = append(os.Environ(), childRole+"=holate", childSocket+"="+sock,
			"KVALLOC_HO_LATE="+role, "KVALLOC_HO_ID=L"+strconv.Itoa(i), "KVALLOC_HO_EPOCH_FILE="+epochFile)
		c.cmd.Stderr = os.Stderr
		c.in, _ = c.cmd.StdinPipe()
		out, _ := c.cmd.StdoutPipe()
		if err := c.cmd.Start(); err != nil {
			return nil, err
		}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				c.out <- sc.Text()
			}
			close(c.out)
		}()
		t.Cleanup(func() { c.cmd.Process.Kill(); c.cmd.Wait() })
		lates = append(lates, c)
	}
	// firstCalls collects "first <epoch> <unix ns>" lines as they come.
	first := map[uint64]int64{}
	var results []string
	drain := func() {
		for _, c := range cls {
			for more := true; more; {
				select {
				case l, ok := <-c.out:
					if !ok {
						more = false
						break
					}
					f := strings.Fields(l)
					switch {
					case len(f) == 3 && f[0] == "first":
						e, _ := strconv.ParseUint(f[1], 0, 64)
						ns, _ := strconv.ParseInt(f[2], 10, 64)
						if v, ok := first[e]; !ok || ns < v {
							first[e] = ns
						}
					case len(f) > 0 && f[0] == "result":
						results = append(results, l)
					default:
						t.Logf("client: %s", l)
					}
				default:
					more = false
				}
			}
		}
	}
	time.Sleep(500 * time.Millisecond)
	for h := range handoffs {
		drain()
		// Every key recorded before the handoff begins must survive it.
		before := readKeys(dir, clients)
		t0 := time.Now()
		var nd *hoDaemon
		if route == "fdstore" {
			d.cmd.Process.Signal(syscall.SIGTERM)
			<-d.exited
			f.until(t, "the index", func() bool { return len(f.store["index"]) == 1 })
			nd = startUnit(t, f, sock, f.files(t, "pool", "index"), "pool", "index")
		} else if nd, err = startHandoffd(t, exe, sock, true); err != nil {
			return rep, fmt.Errorf("handoff %d: %w", h, err)
		}
		if h == kill {
			rep.killed++
			// SIGKILL as soon as the old daemon says it drains.
			deadline := time.After(10 * time.Second)
		wait:
			for {
				select {
				case l := <-d.lines:
					if strings.Contains(l, "handoff: draining") {
						d.cmd.Process.Signal(syscall.SIGKILL)
						break wait
					}
				case <-deadline:
					return rep, fmt.Errorf("handoff %d: the old daemon never said it drains", h)
				}
			}
		}
		if route != "fdstore" {
			if err := nd.wait(); err != nil {
				return rep, fmt.Errorf("handoff %d: %w", h, err)
			}
		}
		if err := setEpoch(nd.epoch); err != nil {
			return rep, err
		}
		select {
		case <-d.exited:
		case <-time.After(15 * time.Second):
			return rep, fmt.Errorf("handoff %d: the old daemon did not exit", h)
		}
		if h != kill && d.cmd.ProcessState.ExitCode() != 0 {
			return rep, fmt.Errorf("handoff %d: the old daemon exited %v", h, d.cmd.ProcessState)
		}
		switch {
		case nd.how == "handoff" || nd.how == "fdstore" && route == "fdstore":
		case nd.how == "cold" && h == kill:
			rep.killedCold = true
			lostBefore = len(epochs)
			t.Logf("handoff %d (SIGKILL): the new daemon started cold: %s", h, nd.why)
		default:
			return rep, fmt.Errorf("handoff %d: the new daemon started %q: %s", h, nd.how, nd.why)
		}
		epochs = append(epochs, nd.epoch)
		d = nd
		rep.handoffs++
		voided := map[uint64]bool{}
		for _, e := range epochs[:lostBefore] {
			voided[e] = true
		}
		if err := checkKeys(sock, before, voided, rep); err != nil {
			return rep, fmt.Errorf("handoff %d: %w", h, err)
		}
		if rep.lost > 0 || rep.wrong > 0 {
			return rep, fmt.Errorf("handoff %d: %d finished objects lost, %d with wrong bytes", h, rep.lost, rep.wrong)
		}
		time.Sleep(time.Duration(300+rand.IntN(400)) * time.Millisecond)
		// The figure is the clients' own clock, so waiting longer for
		// their lines (a loaded machine, the race detector) changes
		// nothing measured.
		drain()
		for wait := time.Now().Add(10 * time.Second); first[nd.epoch] == 0 && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
			drain()
		}
		if ns, ok := first[nd.epoch]; ok {
			rep.firstCall = append(rep.firstCall, time.Unix(0, ns).Sub(t0))
		} else {
			return rep, fmt.Errorf("handoff %d: no client was served by the new daemon within 10 s", h)
		}
	}
	for _, c := range append(cls, lates...) {
		c.in.Close()
	}
	for _, c := range cls {
		for l := range c.out {
			if strings.HasPrefix(l, "result") {
				results = append(results, l)
			}
		}
		c.cmd.Wait()
	}
	for _, c := range lates {
		got := false
		for l := range c.out {
			var n, w int
			if _, err := fmt.Sscanf(l, "late %d %d", &n, &w); err == nil {
				rep.lateCopies += n
				rep.lateWrong += w
				got = true
			} else {
				t.Logf("late client: %s", l)
			}
		}
		c.cmd.Wait()
		if !got {
			return rep, errors.New("a late client did not report")
		}
	}
	if len(results) != clients {
		return rep, fmt.Errorf("%d of %d clients reported", len(results), clients)
	}
	for _, l := range results {
		var cyc, rec, failed, wrong, missing int
		if _, err := fmt.Sscanf(l, "result %d %d %d %d %d", &cyc, &rec, &failed, &wrong, &missing); err != nil {
			return rep, fmt.Errorf("client result %q: %v", l, err)
		}
		rep.cycles += cyc
		rep.reconnects += rec
		rep.failed += failed
		rep.clientWrong += wrong
		rep.clientMissing += missing
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.exited
	switch {
	case rep.lost > 0 || rep.wrong > 0:
		return rep, fmt.Errorf("%d finished objects lost, %d with wrong bytes", rep.lost, rep.wrong)
	case rep.failed > 0 || rep.clientWrong > 0 || rep.clientMissing > 0:
		return rep, fmt.Errorf("clients: %d calls failed beyond one reconnect, %d wrong bytes, %d own keys missing", rep.failed, rep.clientWrong, rep.clientMissing)
	case rep.lateWrong > 0:
		return rep, fmt.Errorf("the late reader saw %d wrong bytes", rep.lateWrong)
	case rep.lateCopies == 0:
		return rep, errors.New("no late client copied across a restart")
	case rep.preserved == 0:
		return rep, errors.New("no object was checked")
	}
	return rep, nil
}

// hoKey is a key a client recorded, with the epoch it finished under.
type hoKey struct {
	key   l1.ObjectKey
	epoch uint64
}

// readKeys reads every client's file of finished keys (whole lines only).
func readKeys(dir string, clients int) []hoKey {
	var out []hoKey
	for i := range clients {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("client%d.keys", i)))
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if !strings.HasSuffix(l, "\n") {
				break
			}
			f := strings.Fields(l)
			if len(f) != 2 {
				continue
			}
			e, _ := strconv.ParseUint(f[1], 0, 64)
			out = append(out, hoKey{key: hoKeyOf(f[0]), epoch: e})
		}
	}
	return out
}

func hoKeyOf(s string) l1.ObjectKey { return l1.ObjectKey{ChunkHash: s, Model: "handoff"} }

// checkKeys reads every key of ks (but those of voided epochs) from the
// daemon on sock and checks its stamps.
func checkKeys(sock string, ks []hoKey, voided map[uint64]bool, rep *hoReport) error {
	c, err := client.Dial(sock, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("the checker cannot connect: %w", err)
	}
	defer c.Close()
	var want []l1.ObjectKey
	rep.preserved, rep.voided = 0, 0
	for _, k := range ks {
		if voided[k.epoch] {
			rep.voided++
			continue
		}
		want = append(want, k.key)
	}
	rep.reads += len(want)
	for len(want) > 0 {
		batch := want[:min(len(want), 4096)]
		want = want[len(batch):]
		rs, err := c.ReserveRead(batch, 1)
		if err != nil {
			return fmt.Errorf("the checker's read: %w", err)
		}
		var got []l1.ObjectKey
		var leases []client.Lease
		for i, r := range rs {
			if r.Status != wire.StatusOK {
				rep.lost++
				continue
			}
			b, err := c.Bytes(r.Block)
			if err != nil {
				return err
			}
			s := stampOf(batch[i])
			if binary.LittleEndian.Uint64(b) != s || binary.LittleEndian.Uint64(b[handoffObject-8:]) != s {
				rep.wrong++
			} else {
				rep.preserved++
			}
			got, leases = append(got, batch[i]), append(leases, r.Lease)
		}
		if _, err := c.FinishRead(got, leases, 1); err != nil {
			return fmt.Errorf("the checker's release: %w", err)
		}
	}
	return nil
}

// startHandoffd starts a daemon process and, unless takeover, waits until
// it serves.
func startHandoffd(t *testing.T, exe, sock string, takeover bool) (*hoDaemon, error) {
	return startHandoffdEnv(t, exe, sock, takeover, nil)
}

// startHandoffdEnv is startHandoffd with more of the daemon's environment
// (KVALLOC_HO_POOL, the bites' switches).
func startHandoffdEnv(t *testing.T, exe, sock string, takeover bool, env []string) (*hoDaemon, error) {
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRole+"=handoffd", childSocket+"="+sock, "KVALLOC_HO_TAKEOVER="+strconv.FormatBool(takeover))
	cmd.Env = append(cmd.Env, env...)
	d, err := launchHandoffd(t, cmd)
	if err != nil || takeover {
		return d, err
	}
	return d, d.wait()
}

// launchHandoffd starts cmd, a daemon process in role handoffd.
func launchHandoffd(t *testing.T, cmd *exec.Cmd) (*hoDaemon, error) {
	d := &hoDaemon{cmd: cmd, exited: make(chan struct{}), lines: make(chan string, 256)}
	stdout, _ := d.cmd.StdoutPipe()
	stderr, _ := d.cmd.StderrPipe()
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "serving ") {
				serving <- sc.Text()
			} else {
				fmt.Fprintln(os.Stderr, "daemon:", sc.Text())
			}
		}
		close(serving)
	}()
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "level=WARN") || strings.Contains(sc.Text(), "level=ERROR") {
				fmt.Fprintln(os.Stderr, "daemon:", sc.Text())
			}
			select {
			case d.lines <- sc.Text():
			default: // nobody listens: drop it
			}
		}
		d.cmd.Wait()
		close(d.exited)
	}()
	d.wait = func() error {
		select {
		case l, ok := <-serving:
			if !ok {
				return errors.New("the daemon exited before serving")
			}
			// serving <epoch> <how> [why...]
			f := strings.SplitN(l, " ", 4)
			d.epoch, _ = strconv.ParseUint(f[1], 0, 64)
			d.how = f[2]
			if len(f) > 3 {
				d.why = f[3]
			}
			return nil
		case <-time.After(30 * time.Second):
			return errors.New("the daemon did not serve within 30 s")
		}
	}
	return d, nil
}

// handoffd is the daemon process: it prints "serving <epoch> <how> <why>"
// once it serves, and exits when handed off or on SIGTERM.
func handoffd() int {
	pool := int64(handoffPool)
	if v, err := strconv.ParseInt(os.Getenv("KVALLOC_HO_POOL"), 10, 64); err == nil {
		pool = v
	}
	cfg := server.Config{SocketPath: os.Getenv(childSocket), PoolSize: pool,
		Takeover: os.Getenv("KVALLOC_HO_TAKEOVER") == "true",
		Systemd:  os.Getenv("KVALLOC_HO_SYSTEMD") == "1",
		L1:       l1.Config{EvictOnDemand: true, Eviction: l1.EvictPrefix},
		Logger:   slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if os.Getenv("KVALLOC_HO_BITE") == "1" {
		server.DropFromHandoffs()
	}
	if os.Getenv("KVALLOC_HO_RELEASE_BITE") == "1" {
		server.ReleaseLeasesAtRestart()
	}
	if os.Getenv("KVALLOC_HO_COMMIT_BITE") == "1" {
		server.ExitAtHandoffCommit()
	}
	if os.Getenv("KVALLOC_HO_UID_BITE") == "1" {
		server.TakeoverFromAnyUID()
	}
	if p := os.Getenv("KVALLOC_HO_DIE_AT"); p != "" {
		server.KillTakeoverAt(p)
	}
	if d, err := time.ParseDuration(os.Getenv("KVALLOC_HO_DIAL_TIMEOUT")); err == nil {
		server.SetTakeoverTimeout(d)
	}
	if err := handoffdL2(&cfg); err != nil { // l2restart_test.go
		fmt.Println("l2:", err)
		return 1
	}
	s, err := server.New(cfg)
	if err != nil {
		fmt.Println("new:", err)
		return 1
	}
	// A daemon that took a pool over must serve before saying so.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	how, why := s.Start()
	fmt.Printf("serving %#x %s %s\n", s.Epoch(), how, why)
	select {
	case <-sig:
		// A daemon that does not stop says where it is stuck.
		t := time.AfterFunc(5*time.Second, func() { pprof.Lookup("goroutine").WriteTo(os.Stdout, 2) })
		defer t.Stop()
		s.Close()
		<-done
	case <-done:
		lingerAfterHandoff(s) // l2restart_test.go
		s.Close()
	}
	return 0
}

// handoffClient is one client process: cycles until stdin closes, then
// prints "result <cycles> <reconnects> <failed> <wrong> <missing>".
func handoffClient() int {
	sock, id := os.Getenv(childSocket), os.Getenv("KVALLOC_HO_ID")
	f, err := os.OpenFile(os.Getenv("KVALLOC_HO_FILE"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Println("file:", err)
		return 1
	}
	stop := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	var cycles, reconnects, failed, wrong, missing int
	var c *client.Client
	var epoch uint64
	connect := func() error {
		if c != nil {
			c.Close()
		}
		for start := time.Now(); ; time.Sleep(2 * time.Millisecond) {
			if c, err = client.Dial(sock, client.Options{Timeout: 10 * time.Second}); err == nil {
				return nil
			}
			if time.Since(start) > 15*time.Second {
				return err
			}
		}
	}
	if err := connect(); err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	epochs, _ := strconv.Atoi(os.Getenv("KVALLOC_HO_EPOCHS"))
	seen := 0 // epochs this client was served under
	// served notes the first call served under each epoch.
	served := func() {
		if c.Epoch() != epoch {
			epoch = c.Epoch()
			seen++
			fmt.Printf("first %#x %d\n", epoch, time.Now().UnixNano())
		}
	}
	var mine []l1.ObjectKey // finished under the current epoch
	n := 0
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	// cycle writes a batch (or, past the cap, reads back one of the
	// epoch's keys). It returns an error when the connection failed.
	cycle := func() error {
		budget := handoffCap
		if epochs > 0 {
			budget = handoffCap * max(seen, 1) / epochs
		}
		if n >= budget || rng.IntN(10) > 0 { // writes spread over the run
			if len(mine) == 0 {
				return c.Ping()
			}
			k := []l1.ObjectKey{mine[rng.IntN(len(mine))]}
			return hoReadBack(c, k, &wrong, &missing)
		}
		ks := make([]l1.ObjectKey, handoffBatch)
		for i := range ks {
			ks[i] = hoKeyOf(fmt.Sprintf("c%s-%d", id, n+i))
		}
		rs, err := c.ReserveWrite(ks, nil, handoffObject, l1.ModeAll)
		if err != nil {
			return err
		}
		served()
		leases := make([]client.Lease, len(ks))
		for i, r := range rs {
			if r.Status != wire.StatusOK {
				return fmt.Errorf("reserve %v: %v", ks[i], r.Status)
			}
			b, err := c.Bytes(r.Block)
			if err != nil {
				return err
			}
			binary.LittleEndian.PutUint64(b, stampOf(ks[i]))
			binary.LittleEndian.PutUint64(b[handoffObject-8:], stampOf(ks[i]))
			leases[i] = r.Lease
		}
		sts, err := c.FinishWrite(ks, leases)
		if err != nil {
			return err
		}
		for i, st := range sts {
			if st != wire.StatusOK {
				return fmt.Errorf("finish %v: %v", ks[i], st)
			}
			fmt.Fprintf(f, "%s %#x\n", ks[i].ChunkHash, c.Epoch())
		}
		n += len(ks)
		mine = append(mine, ks...)
		if rng.IntN(4) == 0 {
			return hoReadBack(c, []l1.ObjectKey{mine[rng.IntN(len(mine))]}, &wrong, &missing)
		}
		return nil
	}
	for {
		select {
		case <-stop:
			fmt.Printf("result %d %d %d %d %d\n", cycles, reconnects, failed, wrong, missing)
			return 0
		default:
		}
		err := cycle()
		if err != nil && (errors.Is(err, client.ErrDisconnected) || errors.Is(err, l1.ErrClosed)) {
			reconnects++
			if cerr := connect(); cerr != nil {
				fmt.Println("reconnect:", cerr)
				failed++
				continue
			}
			mine = mine[:0] // the new epoch's keys are checked by the harness
			err = cycle()
		}
		if err != nil {
			fmt.Println("cycle failed:", err)
			failed++
		} else {
			served()
		}
		cycles++
		time.Sleep(time.Millisecond)
	}
}

// hoReadBack read-locks ks, checks their stamps and releases them.
func hoReadBack(c *client.Client, ks []l1.ObjectKey, wrong, missing *int) error {
	rs, err := c.ReserveRead(ks, 1)
	if err != nil {
		return err
	}
	for i, r := range rs {
		if r.Status != wire.StatusOK {
			*missing++
			continue
		}
		b, err := c.Bytes(r.Block)
		if err != nil {
			return err
		}
		s := stampOf(ks[i])
		if binary.LittleEndian.Uint64(b) != s || binary.LittleEndian.Uint64(b[handoffObject-8:]) != s {
			*wrong++
		}
		if _, err := c.FinishRead(ks[i:i+1], []client.Lease{r.Lease}, 1); err != nil {
			return err
		}
	}
	return nil
}
