//go:build linux

package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// The per-connection limits (server/quota.go): a call that would take a
// connection past its read locks or write bytes is cut, its first keys
// carried out and the rest answered OVER_LIMIT, nothing changed for them;
// other connections are served as before.

// results checks a call's statuses against want.
func results(t testing.TB, what string, res []client.Result, err error, want ...wire.Status) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	sts := make([]wire.Status, len(res))
	for i, r := range res {
		sts[i] = r.Status
		if r.Status != wire.StatusOK && (r.Lease != (client.Lease{}) || r.Block != (client.Block{})) {
			t.Fatalf("%s: key %d is %v with lease %d, block %+v", what, i, r.Status, r.Lease, r.Block)
		}
	}
	statuses(t, what, sts, err, want...)
}

// readLocks is the read locks the open connections hold, by their
// ledgers.
func readLocks(s *server.Server) int64 {
	var n int64
	for _, c := range s.Connections() {
		n += c.ReadLocks
	}
	return n
}

// repeat returns n copies of s.
func repeat(s wire.Status, n int) []wire.Status {
	out := make([]wire.Status, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// finished makes n objects of 4096 bytes under prefix, by a connection of
// their own.
func finished(t testing.TB, s *server.Server, prefix string, n int) []l1.ObjectKey {
	t.Helper()
	w := dial(t, s)
	ks := keys(prefix, n)
	res, err := w.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	results(t, "write "+prefix, res, err, repeat(wire.StatusOK, n)...)
	allOK(t, "finish "+prefix)(w.FinishWrite(ks, leasesOf(res)))
	return ks
}

// TestConnReadLocksAtTheLimit: a connection holds up to ConnReadLocks read
// locks, at and under the limit every key is served, past it the call is
// cut; another connection is then still served in full.
func TestConnReadLocksAtTheLimit(t *testing.T) {
	s := start(t, server.Config{ConnReadLocks: 10})
	ks := finished(t, s, "obj", 20)
	r := dial(t, s)

	res, err := r.ReserveRead(ks[:4], 2) // 8 of 10: under
	results(t, "8 locks", res, err, repeat(wire.StatusOK, 4)...)
	held := leasesOf(res)
	res, err = r.ReserveRead(ks[4:6], 1) // 10 of 10: at
	results(t, "10 locks", res, err, wire.StatusOK, wire.StatusOK)
	held = append(held, leasesOf(res)...)
	before := s.Stats()
	res, err = r.ReserveRead(ks[6:7], 1) // 11: over
	results(t, "the 11th lock", res, err, wire.StatusOverLimit)
	res, n, err := r.ReserveReadPrefix(ks[6:9], 1)
	results(t, "a prefix at the limit", res, err, wire.StatusOverLimit, wire.StatusSkipped, wire.StatusSkipped)
	if n := metric(t, s, "kvalloc_daemon_over_limit_keys_total"); n != 4 {
		t.Fatalf("over_limit_keys_total %v, want 4 (1 key, then 3 of a prefix)", n)
	}
	if n != 0 {
		t.Fatalf("prefix %d at the limit, want 0", n)
	}
	res, n, err = r.ReserveReadPrefixWait(ks[6:9], 1, time.Millisecond)
	results(t, "a waiting prefix at the limit", res, err, wire.StatusOverLimit, wire.StatusSkipped, wire.StatusSkipped)
	if n != 0 {
		t.Fatalf("waiting prefix %d at the limit, want 0", n)
	}
	res, err = r.FinishWriteAndReserveRead(ks[6:7], []client.Lease{{Epoch: s.Epoch(), ID: 1}}, 1)
	results(t, "finish_write_and_reserve_read at the limit", res, err, wire.StatusOverLimit)
	if after := s.Stats(); readLocks(s) != 10 || after.HeldBytes != before.HeldBytes || after.WriteLocked != before.WriteLocked {
		t.Fatalf("refusals changed the pool: %d read locks, held %d → %d bytes", readLocks(s), before.HeldBytes, after.HeldBytes)
	}

	// Another connection is served in full.
	o := dial(t, s)
	res, err = o.ReserveRead(ks[:10], 1)
	results(t, "another connection's 10", res, err, repeat(wire.StatusOK, 10)...)
	allOK(t, "another connection releases")(o.FinishRead(ks[:10], leasesOf(res), 1))

	// Giving 2 locks back makes room for 2: a call of 4 is cut after 2,
	// in request order.
	allOK(t, "release 2")(r.FinishRead(ks[:1], held[:1], 2))
	res, err = r.ReserveRead(ks[6:10], 1)
	results(t, "4 keys with room for 2", res, err, wire.StatusOK, wire.StatusOK, wire.StatusOverLimit, wire.StatusOverLimit)
	if i := client.OverLimitAt(res); i != 2 || res[i].Status.String() != "OVER_LIMIT" {
		t.Fatalf("OverLimitAt %d, want 2, OVER_LIMIT", i)
	}
	allOK(t, "release the cut call's 2")(r.FinishRead(ks[6:8], leasesOf(res)[:2], 1))

	// A prefix lookup stops at the cut (OVER_LIMIT, then SKIPPED) when it
	// reaches it, and at its own miss before it otherwise.
	res, n, err = r.ReserveReadPrefix(ks[10:14], 1)
	results(t, "a prefix cut after 2", res, err, wire.StatusOK, wire.StatusOK, wire.StatusOverLimit, wire.StatusSkipped)
	if n != 2 {
		t.Fatalf("prefix %d, want 2", n)
	}
	allOK(t, "release the prefix")(r.FinishRead(ks[10:12], leasesOf(res)[:2], 1))
	chain := []l1.ObjectKey{ks[12], {ChunkHash: "missing", Model: "m"}, ks[13], ks[14]}
	res, n, err = r.ReserveReadPrefix(chain, 1)
	results(t, "a prefix that misses before the cut", res, err, wire.StatusOK, wire.StatusKeyNotExist, wire.StatusSkipped, wire.StatusSkipped)
	if n != 1 {
		t.Fatalf("prefix %d, want 1", n)
	}
	allOK(t, "release")(r.FinishRead(ks[12:13], leasesOf(res)[:1], 1))
	check(t, s)
}

// TestConnReadLocksDefault: with the defaults, one connection cannot
// read-lock more than DefaultConnReadLocks keys, and another one can
// still lock them all.
func TestConnReadLocksDefault(t *testing.T) {
	const n = server.DefaultConnReadLocks + 3
	s := start(t, server.Config{PoolSize: (n + 16) * 4096})
	ks := finished(t, s, "k", n)
	r := dial(t, s)
	res, err := r.ReserveRead(ks, 1)
	if err != nil || len(res) != n {
		t.Fatalf("one connection: %d results, %v", len(res), err)
	}
	for i, x := range res {
		if want := wire.StatusOK; i >= server.DefaultConnReadLocks && x.Status != wire.StatusOverLimit || i < server.DefaultConnReadLocks && x.Status != want {
			t.Fatalf("one connection: key %d of %d is %v, want OK for the first %d and OVER_LIMIT after", i, n, x.Status, server.DefaultConnReadLocks)
		}
	}
	if n := readLocks(s); n != server.DefaultConnReadLocks {
		t.Fatalf("%d read locks held, want %d", n, server.DefaultConnReadLocks)
	}
	o := dial(t, s)
	res, err = o.ReserveRead(ks[server.DefaultConnReadLocks:], 1)
	results(t, "another connection", res, err, repeat(wire.StatusOK, 3)...)
	check(t, s)
}

// TestConnReadLocksFinishWriteAndReserveRead: publishing writes as reads
// counts against the read limit; a key past the cut keeps its write,
// which finishes as usual.
func TestConnReadLocksFinishWriteAndReserveRead(t *testing.T) {
	s := start(t, server.Config{ConnReadLocks: 8})
	w := dial(t, s)
	ks := keys("fw", 3)
	res, err := w.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	results(t, "reserve", res, err, repeat(wire.StatusOK, 3)...)
	ls := leasesOf(res)
	got, err := w.FinishWriteAndReserveRead(ks, ls, 4)
	results(t, "publish 3 at 4 locks with room for 8", got, err, wire.StatusOK, wire.StatusOK, wire.StatusOverLimit)
	if st := s.Stats(); st.WriteLocked != 1 || readLocks(s) != 8 {
		t.Fatalf("write-locked %d, read locks %d; want 1 and 8", st.WriteLocked, readLocks(s))
	}
	allOK(t, "the cut key's write finishes")(w.FinishWrite(ks[2:], ls[2:]))
	check(t, s)
}

// TestConnWriteBytesMemoryBindsFirst: the status names what binds. With a
// limit of the pool's size or more, and for an object larger than the
// pool, l1 answers every key (its OUT_OF_MEMORY tail); a cut prefix that
// ran out of memory makes the keys past the cut OUT_OF_MEMORY too.
func TestConnWriteBytesMemoryBindsFirst(t *testing.T) {
	const obj = 8 << 20
	s := start(t, server.Config{PoolSize: 8 * obj, ConnWriteBytes: 9 * obj}) // a limit past the pool
	w := dial(t, s)
	ks := keys("mem", 10)
	res, err := w.ReserveWrite(ks, nil, obj, l1.ModeAll)
	results(t, "10 objects into room for 8, a limit of 9", res, err,
		append(repeat(wire.StatusOK, 8), wire.StatusOutOfMemory, wire.StatusOutOfMemory)...)
	allOK(t, "abort")(w.AbortWrite(ks[:8], leasesOf(res)[:8]))

	s = start(t, server.Config{PoolSize: 8 * obj, ConnWriteBytes: 6 * obj})
	other, w := dial(t, s), dial(t, s)
	held, err := other.ReserveWrite(keys("other", 5), nil, obj, l1.ModeAll)
	results(t, "another connection's 5", held, err, repeat(wire.StatusOK, 5)...)
	res, err = w.ReserveWrite(ks, nil, obj, l1.ModeAll) // cut at 6; memory for 3
	results(t, "cut at 6 with memory for 3", res, err, append(repeat(wire.StatusOK, 3), repeat(wire.StatusOutOfMemory, 7)...)...)
	if n := metric(t, s, "kvalloc_daemon_over_limit_keys_total"); n != 0 {
		t.Fatalf("over_limit_keys_total %v, want 0: memory bound first", n)
	}
	allOK(t, "abort")(w.AbortWrite(ks[:3], leasesOf(res)[:3]))
	res, err = w.ReserveWrite(ks[:2], nil, 9*obj, l1.ModeAll)
	results(t, "objects larger than the pool", res, err, wire.StatusOutOfMemory, wire.StatusOutOfMemory)
	allOK(t, "the other connection aborts")(other.AbortWrite(keys("other", 5), leasesOf(held)))
	res, err = w.ReserveWrite(ks[:2], nil, 4*obj, l1.ModeAll) // the limit binds: 6 of 8 objects' worth
	results(t, "the limit binds", res, err, wire.StatusOK, wire.StatusOverLimit)
	allOK(t, "abort")(w.AbortWrite(ks[:1], leasesOf(res)[:1]))
}

// TestConnWriteBytesAtTheLimit: write reservations count the bytes asked;
// at and under ConnWriteBytes every key is reserved, past it the call is
// cut in request order (chain positions with it), and a size beyond the
// limit is refused whole; another connection is served in full.
func TestConnWriteBytesAtTheLimit(t *testing.T) {
	s := start(t, server.Config{ConnWriteBytes: 5 * 4096})
	w := dial(t, s)
	ks := keys("w", 12)
	res, err := w.ReserveWrite(ks[:4], nil, 4096, l1.ModeAll) // under
	results(t, "4 of 5 blocks", res, err, repeat(wire.StatusOK, 4)...)
	ls := leasesOf(res)
	res, err = w.ReserveWrite(ks[4:5], nil, 4096, l1.ModeAll) // at
	results(t, "5 of 5", res, err, wire.StatusOK)
	ls = append(ls, leasesOf(res)...)
	before := s.Stats()
	res, err = w.ReserveWrite(ks[5:6], nil, 1, l1.ModeAll) // over, by a byte
	results(t, "a byte over", res, err, wire.StatusOverLimit)
	if after := s.Stats(); after.WriteLocked != before.WriteLocked || after.HeldBytes != before.HeldBytes {
		t.Fatalf("the refusal changed the pool: write-locked %d → %d, held %d → %d", before.WriteLocked, after.WriteLocked, before.HeldBytes, after.HeldBytes)
	}

	o := dial(t, s)
	res, err = o.ReserveWrite(ks[6:11], nil, 4096, l1.ModeAll)
	results(t, "another connection's 5", res, err, repeat(wire.StatusOK, 5)...)
	allOK(t, "another connection aborts")(o.AbortWrite(ks[6:11], leasesOf(res)))
	res, err = o.ReserveWrite(ks[11:], nil, 6*4096, l1.ModeAll)
	results(t, "one key larger than the limit", res, err, wire.StatusOverLimit)

	// Finishing 2 makes room for 2 blocks: a chain of 3 is cut after 2.
	allOK(t, "finish 2")(w.FinishWrite(ks[:2], ls[:2]))
	res, err = w.ReserveWriteChain(ks[6:9], []uint32{0, 1, 2}, nil, 4096, l1.ModeAll)
	results(t, "a chain of 3 with room for 2", res, err, wire.StatusOK, wire.StatusOK, wire.StatusOverLimit)
	allOK(t, "finish the chain's 2")(w.FinishWrite(ks[6:8], leasesOf(res)[:2]))
	allOK(t, "finish the rest")(w.FinishWrite(ks[2:5], ls[2:5]))
	if st := s.Stats(); st.WriteLocked != 0 {
		t.Fatalf("%d write-locked at the end", st.WriteLocked)
	}
	check(t, s)
}

// TestConnLimitsConfig: negative limits and a MaxFrame out of range are
// refused by New.
func TestConnLimitsConfig(t *testing.T) {
	for _, cfg := range []server.Config{
		{ConnReadLocks: -1}, {ConnWriteBytes: -1},
		{MaxFrame: server.MinMaxFrame - 1}, {MaxFrame: wire.MaxFrame + 1}, {MaxFrame: -1},
	} {
		cfg.SocketPath = t.TempDir() + "/s.sock"
		if s, err := server.New(cfg); err == nil {
			s.Close()
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// TestConnMaxFrame: the hello announces Config.MaxFrame; a frame of
// MaxFrame bytes is carried out, one of MaxFrame+1 is TOO_LARGE and
// closes, and the client refuses it before sending.
func TestConnMaxFrame(t *testing.T) {
	const max = 64 << 10
	s := start(t, server.Config{MaxFrame: max})
	r := raw(t, s, true)
	if c := dial(t, s); c.MaxFrame() != max {
		t.Fatalf("the client says the daemon's MaxFrame is %d, want %d", c.MaxFrame(), max)
	}
	var e wire.Encoder
	for _, size := range []int{max - 1, max} {
		b, err := e.AppendRequest(nil, touchOfSize(size, r.epoch))
		if err != nil || len(b) != size {
			t.Fatalf("a touch of %d bytes: %d, %v", size, len(b), err)
		}
		carriedOut(t, r, fmt.Sprintf("a touch of %d bytes", size), b)
	}
	b, _ := e.AppendRequest(nil, touchOfSize(max+1, r.epoch))
	r.send(b)
	a := r.answer()
	if a.Code != wire.CodeTooLarge {
		t.Fatalf("a frame of %d bytes: %v %q, want TOO_LARGE", max+1, a.Code, a.Message)
	}
	t.Logf("%v: %s", a.Code, a.Message)
	r.closed()

	c := dial(t, s)
	if err := c.Touch(touchOfSize(max+1, c.Epoch()).Keys); err == nil {
		t.Fatal("the client sent a frame over the daemon's MaxFrame")
	} else {
		t.Log(err)
	}
	if err := c.Ping(); err != nil {
		t.Fatalf("the client after its refusal: %v", err)
	}
	check(t, s)
}
