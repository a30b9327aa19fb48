//go:build linux

package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The daemon's log goes through logHandler, which wraps the handler of
// Config.Logger so that logging can neither end nor flood the daemon:
//
//   - A record the handler fails to write (a stderr whose reader is gone,
//     a full disk) is counted (kvalloc_daemon_log_write_errors_total) and
//     otherwise ignored: the daemon goes on serving. kvallocd ignores
//     SIGPIPE, so such a write fails with EPIPE instead of killing it.
//   - Each message (a record's text, e.g. "refused frame") is written at
//     most logBurst times a second; the rest are counted
//     (kvalloc_daemon_log_suppressed_total), and the next record after the
//     second is preceded by one "log lines suppressed" record per message
//     that lost some, with the count. A peer that makes the daemon log
//     (connecting and going, sending bad frames) costs a bounded number of
//     lines.

// logBurst is how many records of one message are written per second.
const logBurst = 20

// logMessages bounds the messages tracked: beyond it every other message
// shares one count. The daemon's messages are constants, far fewer.
const logMessages = 256

// logState is shared by a logHandler and the handlers derived from it.
type logState struct {
	writeErrors, suppressed atomic.Uint64

	mu     sync.Mutex
	now    func() time.Time
	window time.Time // start of the current second
	counts map[string]*logCount
}

type logCount struct {
	n       int    // records written in this window
	dropped uint64 // records suppressed in this window
	level   slog.Level
}

// logHandler is an slog.Handler around the daemon's; see above.
type logHandler struct {
	inner slog.Handler
	st    *logState
}

func newLogHandler(inner slog.Handler, now func() time.Time) *logHandler {
	return &logHandler{inner: inner, st: &logState{now: now, counts: map[string]*logCount{}}}
}

func (h *logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &logHandler{inner: h.inner.WithAttrs(as), st: h.st}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{inner: h.inner.WithGroup(name), st: h.st}
}

// Handle writes r unless its message is over its rate, and never returns
// an error: a failed write is counted.
func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	admit, summary := h.st.admit(r)
	for _, s := range summary {
		h.write(ctx, s)
	}
	if admit {
		h.write(ctx, r)
	}
	return nil
}

func (h *logHandler) write(ctx context.Context, r slog.Record) {
	if err := h.inner.Handle(ctx, r); err != nil {
		h.st.writeErrors.Add(1)
	}
}

// admit reports whether r may be written, and returns the summaries of
// the window that ended, if one did.
func (st *logState) admit(r slog.Record) (bool, []slog.Record) {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	var summary []slog.Record
	if now.Sub(st.window) >= time.Second || now.Before(st.window) {
		for msg, c := range st.counts {
			if c.dropped > 0 {
				s := slog.NewRecord(now, max(c.level, slog.LevelWarn), "log lines suppressed", 0)
				s.AddAttrs(slog.String("message", msg), slog.Uint64("suppressed", c.dropped),
					slog.Duration("within", now.Sub(st.window)), slog.Int("limit_per_second", logBurst))
				summary = append(summary, s)
			}
		}
		clear(st.counts)
		st.window = now
	}
	key := r.Message
	c := st.counts[key]
	if c == nil {
		if len(st.counts) >= logMessages {
			key = "(other messages)"
			c = st.counts[key]
		}
		if c == nil {
			c = &logCount{}
			st.counts[key] = c
		}
	}
	c.level = max(c.level, r.Level)
	if c.n >= logBurst {
		c.dropped++
		st.suppressed.Add(1)
		return false, summary
	}
	c.n++
	return true, summary
}
