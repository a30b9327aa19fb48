//go:build linux

package server

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// brokenWriter fails every write after the first n, as a stderr whose
// reader is gone does.
type brokenWriter struct {
	mu  sync.Mutex
	n   int
	buf bytes.Buffer
}

func (w *brokenWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == 0 {
		return 0, errors.New("write |1: broken pipe")
	}
	w.n--
	return w.buf.Write(b)
}

// TestLogRateLimit: one message is written logBurst times a second, the
// rest counted, and the next second opens with a summary that says how
// many; another message has its own allowance.
func TestLogRateLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	var out bytes.Buffer
	h := newLogHandler(slog.NewTextHandler(&out, nil), func() time.Time { return now })
	log := slog.New(h)
	for i := range 100 {
		log.Warn("refused frame", "conn", i)
	}
	log.Info("other")
	if got := strings.Count(out.String(), "refused frame"); got != logBurst {
		t.Fatalf("%d lines of one message in a second, want %d:\n%s", got, logBurst, out.String())
	}
	if !strings.Contains(out.String(), "msg=other") {
		t.Fatal("another message was suppressed")
	}
	if got := h.st.suppressed.Load(); got != 100-logBurst {
		t.Fatalf("suppressed %d", got)
	}
	out.Reset()
	now = now.Add(time.Second)
	log.Warn("refused frame", "conn", 100)
	want := `msg="log lines suppressed" message="refused frame" suppressed=80`
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "conn=100") {
		t.Fatalf("the next second:\n%s\nwant %s and the line itself", out.String(), want)
	}
	// A clock that steps back opens a new window too.
	now = now.Add(-time.Hour)
	for range logBurst + 1 {
		log.Warn("x")
	}
	if got := h.st.suppressed.Load(); got != 100-logBurst+1 {
		t.Fatalf("suppressed %d after the clock stepped back", got)
	}
}

// TestLogWriteErrors: a log whose writer fails counts each record it
// could not write, and Handle never fails.
func TestLogWriteErrors(t *testing.T) {
	w := &brokenWriter{n: 2}
	h := newLogHandler(slog.NewTextHandler(w, nil), time.Now)
	log := slog.New(h).With("daemon", "kvallocd")
	for i := range 5 {
		log.Info("line", "i", i)
	}
	if got := h.st.writeErrors.Load(); got != 3 {
		t.Fatalf("%d write errors, want 3", got)
	}
	if got := strings.Count(w.buf.String(), "daemon=kvallocd"); got != 2 {
		t.Fatalf("%d lines written:\n%s", got, w.buf.String())
	}
}
