//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kvalloc/kvalloc/bench/trace"
	"github.com/kvalloc/kvalloc/client"
)

// The allocation failures a day that LMCache's L1 logged on one
// production server, for the summary's comparison.
const lmcacheLow, lmcacheHigh = 200_000, 600_000

// soak runs the soak and prints its table and summary on out; it returns
// why it failed, or nil.
func soak(cfg config, out io.Writer) (err error) {
	tr, err := trace.ReadFile(cfg.trace, 0)
	if err != nil {
		return err
	}
	o := trace.Options{BlockSize: cfg.object}
	slots := cfg.pool.Slots(tr, o)
	if slots < 1 {
		return fmt.Errorf("a pool of %v holds no block of %d bytes", cfg.pool, cfg.object)
	}
	poolBytes := slots * o.Unit()
	span := time.Duration(tr.Requests[len(tr.Requests)-1].Arrival - tr.Requests[0].Arrival)
	fmt.Fprintf(out, "soak: %s, %d requests over %v, %d distinct blocks; pool %v = %d blocks of %d bytes = %.1f GiB\n",
		filepath.Base(cfg.trace), len(tr.Requests), span.Round(time.Second), tr.Distinct, cfg.pool, slots, o.Unit(), float64(poolBytes)/(1<<30))
	fmt.Fprintf(out, "soak: %d clients as fast as they can for %v; a cycle is %d requests, one in %d ends by SIGKILL; Verify every %v; seed %d\n",
		cfg.clients, cfg.duration, cfg.cycle, cfg.kill, cfg.verifyEvery, cfg.seed)

	dir, err := os.MkdirTemp("", "kvallocsoak-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	requests := filepath.Join(dir, "requests")
	if err := writeRequests(requests, tr); err != nil {
		return err
	}
	d, err := startDaemon(cfg.daemon, dir, poolBytes)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			d.kill()
			if cfg.verbose {
				fmt.Fprintf(out, "kvallocd's log:\n%s\n", d.logTail(1<<30))
			} else {
				fmt.Fprintf(out, "kvallocd's log, the end:\n%s\n", d.logTail(15))
			}
		}
	}()
	fmt.Fprintf(out, "soak: kvallocd pid %d, socket %s, metrics %s\n", d.cmd.Process.Pid, d.sock, d.metrics)
	stats, err := client.Dial(d.sock, client.Options{Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer stats.Close()

	sup, err := startSeats(cfg, dir, d.sock, requests)
	if err != nil {
		return err
	}
	defer sup.close()
	s := &soaker{cfg: cfg, d: d, stats: stats, sup: sup, out: out, rss: rssBound{bytes: cfg.rssSlack, warmup: cfg.warmup}}
	if err := s.loop(); err != nil {
		sup.killAll()
		s.summary(err)
		return err
	}
	err = s.finish()
	s.summary(err)
	return err
}

// soaker is the running soak.
type soaker struct {
	cfg   config
	d     *daemon
	stats *client.Client
	sup   *supervisor
	out   io.Writer
	rss   rssBound
	first sample  // at the start
	last  sample  // the last row's
	rows  []row   // printed so far
	final *sample // at the end
}

// take reads a sample: the stats answer, a Verify, the boards, the kills,
// /proc and the heap.
func (s *soaker) take() (sample, error) {
	var sm sample
	var err error
	sm.at = time.Since(s.sup.start)
	if sm.stats, err = s.stats.Stats(); err != nil {
		return sm, fmt.Errorf("stats: %w", err)
	}
	if sm.debug, err = s.d.verify(); err != nil {
		return sm, fmt.Errorf("/debug/verify: %w", err)
	}
	sm.clients = s.sup.totals()
	sm.kills = len(s.sup.killsSoFar())
	if sm.proc, err = readProcStatus(s.d.cmd.Process.Pid); err != nil {
		return sm, err
	}
	if sm.heap, err = s.d.heapInuse(); err != nil {
		return sm, err
	}
	if sm.touched, err = s.d.poolTouched(); err != nil {
		return sm, err
	}
	return sm, nil
}

// check takes a sample and applies the checks that fail the soak at once.
func (s *soaker) check() (sample, error) {
	sm, err := s.take()
	if err != nil {
		return sm, err
	}
	if err := checkVerify(sm.debug, sm.at); err != nil {
		return sm, err
	}
	return sm, s.rss.observe(sm)
}

// loop runs the clients for the soak's duration, checking every
// verifyEvery and printing a row every minute.
func (s *soaker) loop() error {
	var err error
	if s.first, err = s.check(); err != nil {
		return err
	}
	s.last = s.first
	fmt.Fprintln(s.out, rowHeader)
	verify := time.NewTicker(s.cfg.verifyEvery)
	defer verify.Stop()
	minute := time.NewTicker(s.cfg.minute)
	defer minute.Stop()
	end := time.NewTimer(s.cfg.duration)
	defer end.Stop()
	for {
		select {
		case err := <-s.sup.failed:
			return err
		case <-s.d.exited:
			return fmt.Errorf("kvallocd exited: %v", s.d.err)
		case <-verify.C:
			if _, err := s.check(); err != nil {
				return err
			}
		case <-minute.C:
			if err := s.row(); err != nil {
				return err
			}
		case <-end.C:
			return nil
		}
	}
}

// row takes a sample and prints the row since the last.
func (s *soaker) row() error {
	sm, err := s.check()
	if err != nil {
		return err
	}
	r := rowOf(len(s.rows)+1, s.last, sm)
	s.rows = append(s.rows, r)
	s.last = sm
	fmt.Fprintln(s.out, r.format())
	return nil
}

// finish stops the clients, prints the last row, and checks the end: every
// client's connection closed, nothing locked, used bytes the objects', and
// a clean SIGTERM.
func (s *soaker) finish() error {
	stopAt := time.Since(s.sup.start)
	if !s.sup.stop(30 * time.Second) {
		s.sup.killAll()
		return errors.New("the clients did not stop within 30 s of being told to")
	}
	select {
	case err := <-s.sup.failed:
		return err
	default:
	}
	// The daemon counts a connection closed once released: wait for the
	// clients' (the soak's own stays).
	var sm sample
	var err error
	for t0 := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if sm, err = s.check(); err != nil {
			return err
		}
		if sm.stats.ConnsOpen == 1 || time.Since(t0) > 5*time.Second {
			break
		}
	}
	// The end's time is the clients' (the rates of the summary), and a
	// last, partial row covers it since the last row, if a second or more
	// (the few requests finished after being told to stop count in the
	// summary either way).
	sm.at = stopAt
	if stopAt-s.last.at >= time.Second {
		r := rowOf(len(s.rows)+1, s.last, sm)
		s.rows = append(s.rows, r)
		fmt.Fprintln(s.out, r.format())
	}
	s.final = &sm
	v := sm.debug
	switch {
	case sm.stats.ConnsOpen != 1:
		return fmt.Errorf("%d connections still open 5 s after the clients exited (the soak's own is 1)", sm.stats.ConnsOpen)
	case v.WriteLocked != 0 || v.ReadLocks != 0:
		return fmt.Errorf("after the clients exited: %d objects write-locked, %d read locks", v.WriteLocked, v.ReadLocks)
	case v.QuarantinedBytes != 0 || v.UsedBytes != v.HeldBytes:
		return fmt.Errorf("after the clients exited: used %d bytes, held %d, quarantined %d", v.UsedBytes, v.HeldBytes, v.QuarantinedBytes)
	}
	s.stats.Close()
	if err := s.d.stop(); err != nil {
		return fmt.Errorf("kvallocd on SIGTERM: %w", err)
	}
	return nil
}
