//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// supervisor runs the client seats: it starts each client process, sends
// it SIGKILL when it asks (at its cycle's kill point), and starts the next
// generation in the seat.
type supervisor struct {
	cfg       config
	exe       string
	env       []string // the clients' environment, less the seat
	start     time.Time
	seats     []*seat
	disp      *dispatch
	unmapDisp func()
	stopping  atomic.Bool
	failed    chan error // the first failure
	wg        sync.WaitGroup

	mu    sync.Mutex
	kills []killRecord
}

// killRecord is one SIGKILL the supervisor sent.
type killRecord struct {
	at    time.Duration // since the start
	seat  int
	phase uint64 // the client's phase when it was sent
}

// seat is one client's place: its board and its generations.
type seat struct {
	i     int
	b     *board
	unmap func()
	gens  int
	cur   atomic.Pointer[os.Process] // the client running now
}

// startSeats makes the boards in dir and starts a client in each seat.
func startSeats(cfg config, dir, sock, requests string) (*supervisor, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	s := &supervisor{cfg: cfg, exe: exe, start: time.Now(), failed: make(chan error, 1)}
	s.env = append(os.Environ(), envRole+"="+roleClient, envSocket+"="+sock, envRequests+"="+requests,
		envDispatch+"="+filepath.Join(dir, "dispatch"), envObject+"="+strconv.FormatInt(cfg.object, 10),
		envCycle+"="+strconv.Itoa(cfg.cycle), envKill+"="+strconv.Itoa(cfg.kill), envSeed+"="+strconv.FormatUint(cfg.seed, 10))
	if s.disp, s.unmapDisp, err = mapDispatch(filepath.Join(dir, "dispatch"), true); err != nil {
		return nil, err
	}
	for i := range cfg.clients {
		path := filepath.Join(dir, fmt.Sprintf("board-%d", i))
		b, unmap, err := mapBoard(path, true)
		if err != nil {
			s.close()
			return nil, err
		}
		s.seats = append(s.seats, &seat{i: i, b: b, unmap: unmap})
	}
	for _, st := range s.seats {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.run(st, filepath.Join(dir, fmt.Sprintf("board-%d", st.i)))
		}()
	}
	return s, nil
}

// fail records the first failure.
func (s *supervisor) fail(err error) {
	select {
	case s.failed <- err:
	default:
	}
}

// run keeps a client in seat st until the soak stops or fails.
func (s *supervisor) run(st *seat, board string) {
	for !s.stopping.Load() {
		killed, err := s.generation(st, board)
		if err != nil {
			s.fail(err)
			return
		}
		if !killed {
			return // stopped cleanly
		}
	}
}

// generation runs one client process in seat st until it exits, and
// reports whether the supervisor killed it; an exit it did not cause, or
// a failure to start, is an error, but for a clean exit 0 once stopping.
func (s *supervisor) generation(st *seat, board string) (bool, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return false, err
	}
	defer pr.Close()
	cmd := exec.Command(s.exe)
	cmd.Env = s.clientEnv(st.i, st.gens+1, board)
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = diesWithSoak()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return false, fmt.Errorf("starting client %d: %w", st.i, err)
	}
	st.gens++
	gen := st.gens
	st.cur.Store(cmd.Process)
	events := make(chan time.Time, 16)
	go func() {
		defer close(events)
		buf := make([]byte, 64)
		for {
			n, err := pr.Read(buf)
			for range n {
				events <- time.Now()
			}
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	for {
		select {
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			// The client is at its cycle's kill point: SIGKILL it now.
			if killed || s.stopping.Load() {
				continue
			}
			phase := st.b.phase.Load()
			if cmd.Process.Signal(syscall.SIGKILL) == nil {
				killed = true
				s.mu.Lock()
				s.kills = append(s.kills, killRecord{at: time.Since(s.start), seat: st.i, phase: phase})
				s.mu.Unlock()
			}
		case err := <-exited:
			if events != nil {
				for range events { // the pipe is closed: drain it
				}
			}
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			switch {
			case killed && ws.Signaled() && ws.Signal() == syscall.SIGKILL:
				return true, nil
			case err == nil && s.stopping.Load():
				return false, nil
			}
			return false, fmt.Errorf("client %d (generation %d, pid %d) exited on its own: %v\n%s",
				st.i, gen, cmd.Process.Pid, err, tail(stderr.String(), 20))
		}
	}
}

// diesWithSoak makes a child SIGKILLed when the soak dies (PR_SET_PDEATHSIG),
// so that a soak killed by a signal leaves no daemon or client behind.
func diesWithSoak() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// clientEnv is the environment of generation gen of the client in seat
// i: the clients' shared one, then the seat's. It is a new slice: the
// seats start their clients concurrently, and appending to the shared one
// in place would hand one seat's board to another.
func (s *supervisor) clientEnv(i, gen int, board string) []string {
	env := make([]string, 0, len(s.env)+3)
	env = append(env, s.env...)
	return append(env, envBoard+"="+board, envSlot+"="+strconv.Itoa(i), envGen+"="+strconv.Itoa(gen))
}

// stop tells every client to finish its request and exit, and waits, at
// most wait; it reports whether they all did.
func (s *supervisor) stop(wait time.Duration) bool {
	s.stopping.Store(true)
	for _, st := range s.seats {
		st.b.stop.Store(1)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}

// killAll kills whatever clients still run, after a failure, and waits
// for the seats to end.
func (s *supervisor) killAll() {
	s.stopping.Store(true)
	for _, st := range s.seats {
		st.b.stop.Store(1)
		if p := st.cur.Load(); p != nil {
			_ = p.Kill()
		}
	}
	s.wg.Wait()
}

// totals sums the boards.
func (s *supervisor) totals() totals {
	var t totals
	for _, st := range s.seats {
		t.plus(st.b.read())
	}
	return t
}

// killsSoFar returns the kills sent so far.
func (s *supervisor) killsSoFar() []killRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]killRecord(nil), s.kills...)
}

func (s *supervisor) close() {
	for _, st := range s.seats {
		st.unmap()
	}
	s.unmapDisp()
}
