//go:build linux

package server_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// start runs a daemon on a socket in a temporary directory, closed at the
// end of the test, with cfg's pool (64 MiB, unpopulated, by default).
func start(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	if cfg.SocketPath == "" {
		cfg.SocketPath = filepath.Join(t.TempDir(), "kvallocd.sock")
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = 64 << 20
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

func dial(t testing.TB, s *server.Server) *client.Client {
	t.Helper()
	c, err := client.Dial(s.SocketPath(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func keys(prefix string, n int) []l1.ObjectKey {
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: prefix + string(rune('a'+i%26)) + string(rune('0'+i/26)), Model: "m"}
	}
	return ks
}

func leasesOf(res []client.Result) []client.Lease {
	out := make([]client.Lease, len(res))
	for i, r := range res {
		out[i] = r.Lease
	}
	return out
}

// allOK returns a check that a call's statuses are all OK:
// allOK(t, "FinishWrite")(c.FinishWrite(...)).
func allOK(t testing.TB, what string) func([]wire.Status, error) {
	return func(sts []wire.Status, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i, s := range sts {
			if s != wire.StatusOK {
				t.Fatalf("%s: key %d: %v", what, i, s)
			}
		}
	}
}

func check(t testing.TB, s *server.Server) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestCycle: one client writes bytes into its blocks through the mapping,
// finishes, read-locks, reads them back from the daemon's own mapping and
// its own, releases and deletes.
func TestCycle(t *testing.T) {
	s := start(t, server.Config{})
	c := dial(t, s)
	if c.Epoch() != s.Epoch() || c.PoolSize() != 64<<20 || c.Align() != 4096 {
		t.Fatalf("hello: epoch %#x (daemon %#x), pool %d, align %d", c.Epoch(), s.Epoch(), c.PoolSize(), c.Align())
	}
	ks := keys("cycle", 5)
	res, err := c.ReserveWrite(ks, nil, 1<<20, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != wire.StatusOK {
			t.Fatalf("key %d: %v", i, r.Status)
		}
		b, err := c.Bytes(r.Block)
		if err != nil {
			t.Fatal(err)
		}
		copy(b, ks[i].ChunkHash)
	}
	check(t, s)
	allOK(t, "FinishWrite")(c.FinishWrite(ks, leasesOf(res)))
	rr, n, err := c.ReserveReadPrefix(ks, 1)
	if err != nil || n != len(ks) {
		t.Fatalf("ReserveReadPrefix: %d, %v", n, err)
	}
	pool, _ := s.Pool()
	for i, r := range rr {
		b, _ := c.Bytes(r.Block)
		if !bytes.HasPrefix(b, []byte(ks[i].ChunkHash)) || !bytes.HasPrefix(pool[r.Block.Offset:], []byte(ks[i].ChunkHash)) {
			t.Fatalf("key %d: the bytes written are not there", i)
		}
	}
	check(t, s)
	allOK(t, "FinishRead")(c.FinishRead(ks, leasesOf(rr), 1))
	allOK(t, "Delete")(c.Delete(ks, false))
	st, err := c.Stats()
	if err != nil || st.Objects != 0 || st.UsedBytes != 0 || st.ConnsOpen != 1 || st.WriteReservations != 5 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	check(t, s)
}

// TestInvalidArgument: l1's refusals come back as INVALID_ARGUMENT,
// matching l1.ErrInvalidArgument, and the connection stays usable.
func TestInvalidArgument(t *testing.T) {
	s := start(t, server.Config{})
	c := dial(t, s)
	if _, err := c.ReserveWrite(keys("x", 1), nil, 0, l1.ModeAll); !errors.Is(err, l1.ErrInvalidArgument) || !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("size 0: %v", err)
	}
	if _, err := c.ReserveRead(keys("x", 1), 0); !errors.Is(err, l1.ErrInvalidArgument) {
		t.Fatalf("0 locks: %v", err)
	}
	if _, err := c.FinishRead(keys("x", 1), []client.Lease{{Epoch: c.Epoch(), ID: 1}}, 129); !errors.Is(err, l1.ErrInvalidArgument) {
		t.Fatalf("129 locks: %v", err)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
}

// TestTenThousandKeys: one frame carries a serving engine's largest batch,
// 10,000 keys, every way through the daemon.
func TestTenThousandKeys(t *testing.T) {
	s := start(t, server.Config{})
	c := dial(t, s)
	ks := make([]l1.ObjectKey, 10_000)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%032x", i), Model: "llama-3.1-70b", KVRank: 3}
	}
	res, err := c.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	if err != nil || len(res) != len(ks) || res[len(ks)-1].Status != wire.StatusOK {
		t.Fatalf("reserve: %d results, %v", len(res), err)
	}
	allOK(t, "FinishWrite")(c.FinishWrite(ks, leasesOf(res)))
	rr, n, err := c.ReserveReadPrefix(ks, 1)
	if err != nil || n != len(ks) {
		t.Fatalf("prefix: %d, %v", n, err)
	}
	allOK(t, "FinishRead")(c.FinishRead(ks, leasesOf(rr), 1))
	allOK(t, "Delete")(c.Delete(ks, false))
	check(t, s)
}
