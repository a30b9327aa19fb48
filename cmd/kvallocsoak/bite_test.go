//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test binary is the soak's client when the supervisor starts it so.
func TestMain(m *testing.M) {
	if os.Getenv(envRole) == roleClient {
		os.Exit(clientMain())
	}
	os.Exit(m.Run())
}

// buildDaemon builds kvallocd with the kvalloc_daemon_bugs tag: the
// production daemon, plus the bug KVALLOC_DAEMON_BUG names when it starts.
func buildDaemon(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build kvallocd with:", err)
	}
	bin := filepath.Join(t.TempDir(), "kvallocd")
	out, err := exec.Command(gobin, "build", "-tags", "kvalloc_daemon_bugs", "-o", bin, "../kvallocd").CombinedOutput()
	if err != nil {
		t.Fatalf("go build kvallocd: %v\n%s", err, out)
	}
	return bin
}

// soakCI is make soak SOAK=60s, as CI runs it, against daemon, but for a
// Verify every 2 s (5 s) and 10 s of warm-up (30 s), which make the
// failures come sooner.
func soakCI(daemon string) config {
	return config{daemon: daemon, trace: "../../testdata/traces/mooncake-conversation.jsonl.gz", duration: 60 * time.Second,
		verifyEvery: 2 * time.Second, minute: time.Minute, warmup: 10 * time.Second, clients: 8, cycle: 100, kill: 20,
		pool: mustPool("0.1"), object: 8 << 20, rssSlack: 64 << 20, seed: uint64(time.Now().UnixNano())}
}

// TestSoakBites: the soak, as CI runs it (60 s) but with Verify every 2 s
// and 10 s of RSS warm-up, passes against kvallocd for a while, and fails,
// each before its 60 s are up and with its own message, against a daemon
// that carries one deliberate bug (server's kvalloc_daemon_bugs tag):
//
//   - forget-reads: a dead connection's read locks are kept (Verify);
//   - leak-block: every disconnect loses a block (used bytes against the
//     live objects);
//   - retain: every request's keys are kept (the RssAnon bound);
//   - error: one reserve_read_prefix in 1000 errs (a call that errs other
//     than by status);
//   - no-evict: one reserve_write in 200 is answered OUT_OF_MEMORY without
//     trying (an allocation failure with evictable objects present);
//   - swap-blocks: one reserve_read_prefix in 1000 answers two hits with
//     each other's blocks (the stamps);
//   - keep-conn: one disconnect in 10 goes unnoticed, its locks kept (the
//     end's check that every client's connection closed), in a soak of
//     8 s;
//   - close-error: Close fails (the end's check of a clean SIGTERM), in a
//     soak of 8 s.
//
// It takes about a minute and a half, so the race suite skips it: make
// soak-bites runs it (KVALLOC_SOAK_BITES=1).
func TestSoakBites(t *testing.T) {
	if os.Getenv("KVALLOC_SOAK_BITES") != "1" {
		t.Skip("KVALLOC_SOAK_BITES=1 runs it (make soak-bites): a minute of soaks, too long for the race suite")
	}
	daemon := buildDaemon(t)
	t.Run("control", func(t *testing.T) {
		cfg := soakCI(daemon)
		cfg.duration = 8 * time.Second
		var out bytes.Buffer
		if err := soak(cfg, &out); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "allocation failures with evictable objects present: 0 calls") {
			t.Fatalf("no allocation failures line:\n%s", out.String())
		}
		t.Logf("\n%s", out.String())
	})
	for _, tc := range []struct {
		bug, want string
		atEnd     bool // caught by the checks at the end: the soak runs 8 s
	}{
		{"forget-reads", "read locks under lease", false},
		{"leak-block", "allocator uses", false},
		{"retain", "RssAnon is", false},
		{"error", "reserve_read_prefix of", false},
		{"no-evict", "while an evictable object was present", false},
		{"swap-blocks", "the stamp at byte", false},
		{"keep-conn", "connections still open", true},
		{"close-error", "kvallocd on SIGTERM", true},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			t.Setenv("KVALLOC_DAEMON_BUG", tc.bug)
			cfg := soakCI(daemon)
			limit := cfg.duration
			if tc.atEnd {
				cfg.duration = 8 * time.Second
				limit = cfg.duration + 30*time.Second
			}
			var out bytes.Buffer
			start := time.Now()
			err := soak(cfg, &out)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("against the %s bug: %v, want a failure naming %q\n%s", tc.bug, err, tc.want, out.String())
			}
			if took >= limit {
				t.Fatalf("the soak caught the %s bug after %v, past %v", tc.bug, took, limit)
			}
			t.Logf("caught %s after %v: %v", tc.bug, took.Round(time.Second), err)
		})
	}
}
