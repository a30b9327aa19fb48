//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// secretFile writes a MAC secret of 32 bytes made of seed, mode 0600, in
// a temporary directory.
func secretFile(t *testing.T, seed byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), fmt.Sprintf("secret-%d", seed))
	if err := os.WriteFile(p, append(bytes.Repeat([]byte{'a' + seed%26}, 31), seed, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// openL2 parses args and opens the L2 tier they name.
func openL2(t *testing.T, args ...string) error {
	t.Helper()
	var f l2Flags
	cfg, _, err := parse(args, io.Discard, &f)
	if err != nil {
		return err
	}
	if err := f.open(t.Context(), &cfg); err != nil {
		return err
	}
	cfg.L2.Store.Close()
	return nil
}

// TestL2SecurityFlags: -l2 without a MAC secret is refused unless the
// operator says -l2-insecure-no-mac (before: it ran, and served whatever
// anyone wrote to the Redis); secret and password files are refused when
// group or others may read them, when short or contradicting each other;
// a password in the URL is refused naming -l2-password-file; against a
// Redis with requirepass, a daemon without the password does not start
// (before: it ran with every call failing NOAUTH, and logged nothing),
// and one with -l2-password-file does.
func TestL2SecurityFlags(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	url := srv.URL()
	good := secretFile(t, 1)
	loose := filepath.Join(t.TempDir(), "loose")
	os.WriteFile(loose, bytes.Repeat([]byte("x"), 40), 0o644)
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, []byte("too short\n"), 0o600)
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"-l2", url}, "-l2-secret-file"},
		{[]string{"-l2", url, "-l2-secret-file", loose}, "mode 0644"},
		{[]string{"-l2", url, "-l2-secret-file", short}, "at least 32"},
		{[]string{"-l2", url, "-l2-secret-file", good, "-l2-insecure-no-mac"}, "contradict"},
		{[]string{"-l2", url, "-l2-secret-file-old", good, "-l2-insecure-no-mac"}, "-l2-secret-file-old"},
		{[]string{"-l2", url, "-l2-secret-file", good, "-l2-secret-file-old", good}, "the same secret"},
		{[]string{"-l2", strings.Replace(url, "redis://", "redis://:pw@", 1), "-l2-secret-file", good}, "-l2-password-file"},
		{[]string{"-l2", url + "/0", "-l2-secret-file", good}, "database"},
		{[]string{"-l2", url, "-l2-secret-file", good, "-l2-password-file", loose}, "mode 0644"},
		{[]string{"-l2", url, "-l2-secret-file", good, "-l2-tls-ca-file", good}, "-l2-tls"},
	} {
		if err := openL2(t, c.args...); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v; want a refusal saying %q", c.args, err, c.says)
		}
	}
	for _, args := range [][]string{
		{"-l2", url, "-l2-secret-file", good},
		{"-l2", url, "-l2-secret-file", secretFile(t, 2), "-l2-secret-file-old", good},
		{"-l2", url, "-l2-insecure-no-mac"},
	} {
		if err := openL2(t, args...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}

	admin := srv.Client()
	defer admin.Close()
	if err := admin.ConfigSet(t.Context(), "requirepass", "the-pw").Err(); err != nil {
		t.Fatal(err)
	}
	err := openL2(t, "-l2", url, "-l2-secret-file", good)
	if !errors.Is(err, l2.ErrAuth) || !strings.Contains(err.Error(), "-l2-password-file") {
		t.Fatalf("no password against requirepass: %v", err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("the-pw\n"), 0o600)
	if err := openL2(t, "-l2", url, "-l2-secret-file", good, "-l2-password-file", pw); err != nil {
		t.Fatalf("with -l2-password-file: %v", err)
	}
	// The daemon itself: exit 1 and a log line that says why.
	d, log := daemon(t, "-socket", filepath.Join(t.TempDir(), "d.sock"), "-pool-size", "64MiB", "-populate=false",
		"-l2", url, "-l2-secret-file", good)
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	select {
	case err := <-done:
		if d.ProcessState.ExitCode() != 1 || !strings.Contains(log.String(), "refused the credentials") {
			t.Fatalf("exit %v; log %q", err, log.String())
		}
		t.Logf("a daemon refused by Redis: %s", strings.TrimSpace(log.String()))
	case <-time.After(60 * time.Second):
		t.Fatal("a daemon whose credentials Redis refuses still runs after 60 s")
	}
}

// TestL2ForgedValuesNotServed: node A (kvallocd with -l2-secret-file)
// writes 8 objects; a tenant of the Redis that holds no secret rewrites
// each value with its own payload, as the public format says, checksums
// right; node B with the same secret, which never had them in L1, counts
// no L2 hit and serves none of them, and its /metrics count the values
// its MAC refused. Before the MAC, B served all 8 forged payloads.
func TestL2ForgedValuesNotServed(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	secret := secretFile(t, 3)
	dir := t.TempDir()
	args := func(name, metrics string) []string {
		return []string{"-socket", filepath.Join(dir, name+".sock"), "-pool-size", "64MiB", "-populate=false",
			"-l2", srv.URL(), "-l2-secret-file", secret, "-l2-min-rate", "0", "-metrics", metrics}
	}
	daemon(t, args("a", "127.0.0.1:0")...)
	ca := dialWait(t, filepath.Join(dir, "a.sock"))
	const size = 64 << 10
	keys := make([]l1.ObjectKey, 8)
	for i := range keys {
		keys[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("forge-%d", i), Model: "m"}
	}
	res, err := ca.ReserveWrite(keys, nil, size, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	leases := make([]client.Lease, len(keys))
	for i, r := range res {
		b, _ := ca.Bytes(r.Block)
		fill(b[:size], i)
		leases[i] = r.Lease
	}
	if _, err := ca.FinishWrite(keys, leases); err != nil {
		t.Fatal(err)
	}
	rc := srv.Client()
	defer rc.Close()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if n, _ := rc.DBSize(t.Context()).Result(); n == int64(len(keys)) {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("the puts did not reach Redis")
		}
	}
	// The tenant: SCAN, GET, SET; the format is public.
	names, err := rc.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	le, cast := binary.LittleEndian, crc32.MakeTable(crc32.Castagnoli)
	for _, name := range names {
		v, _ := rc.Get(t.Context(), name).Bytes()
		kl := int(le.Uint16(v[6:]) + le.Uint16(v[8:]) + le.Uint16(v[10:]))
		// A whole value's offsets, or a piece's (kvallocd's default:
		// an object of 64 KiB is one piece).
		hs, crcAt, hcrcAt, macAt := l2.HeaderSize, 32, 36, 40
		if le.Uint16(v[4:]) == l2.PieceVersion {
			hs, crcAt, hcrcAt, macAt = l2.PieceHeaderSize, 48, 52, 56
		}
		n := hs + kl
		evil := bytes.Repeat([]byte("forged!!"), (len(v)-n)/8)
		w := append(bytes.Clone(v[:n]), evil...)
		le.PutUint32(w[crcAt:], crc32.Checksum(evil, cast))
		le.PutUint32(w[hcrcAt:], crc32.Update(crc32.Checksum(w[:hcrcAt], cast), cast, w[macAt:n]))
		rc.Set(t.Context(), name, w, 0)
	}
	metrics := freeAddr(t)
	daemon(t, args("b", metrics)...)
	cb := dialWait(t, filepath.Join(dir, "b.sock"))
	lk, err := cb.Lookup(keys, true)
	if err != nil {
		t.Fatal(err)
	}
	rr, p, err := cb.ReserveReadPrefixWait(keys, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	for i := range p {
		b, _ := cb.Bytes(rr[i].Block)
		if bytes.HasPrefix(b, []byte("forged!!")) {
			served++
		}
	}
	refused, err := scrape(metrics, "kvallocd_l2_mac_failures_total")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a tenant forged %d of %d values; node B: lookup L2 hits %d, served %d forged payloads, %v refused by MAC", len(names), len(keys), lk.L2, served, refused)
	if len(names) != len(keys) || lk.L2 != 0 || p != 0 || served != 0 || refused != float64(len(keys)) {
		t.Fatalf("forged %d; L2 hits %d, prefix %d, served %d, refused %v", len(names), lk.L2, p, served, refused)
	}
}

// freeAddr is a loopback address free when asked, for -metrics.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
