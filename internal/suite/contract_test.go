//go:build linux

package suite

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/internal/reference/daemoncheck"
	"github.com/kvalloc/kvalloc/internal/reference/l1check"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// fronts are the front ends every contract runs against: the manager in
// process; behind a daemon, through a client of each protocol version
// (version 2 names finished keys by handle; the answers must not differ);
// and behind a daemon whose L2 tier is on over a real redis-server (one
// plain server: a cluster's six processes and its slot map would cost
// each contract seconds, and the contracts here are about what one daemon
// answers, not about sharding).
var fronts = []struct {
	name string
	v    func(t *testing.T) l1check.Variant
}{
	{"in-process", func(*testing.T) l1check.Variant { return l1check.Variant{} }},
	{"daemon", func(*testing.T) l1check.Variant { return daemoncheck.Front() }},
	{"daemon-v2", func(*testing.T) l1check.Variant { return daemoncheck.FrontVersion(wire.Version2) }},
	{"daemon+l2", func(t *testing.T) l1check.Variant {
		return daemoncheck.FrontL2(rediscluster.NewServer(t, rediscluster.Options{}).URL())
	}},
}

// fromL2 reports whether s is the front end with L2, where a key L1 lost
// but L2 holds is read from L2: a hit where l1 alone answers a miss.
func fromL2(s *l1check.System) bool {
	_, ok := daemoncheck.FrontL2Loads(s.M)
	return ok
}

// each runs contract once per front end on a fresh system of setup.
func each(t *testing.T, setup l1check.Setup, contract func(t *testing.T, s *l1check.System)) {
	for _, f := range fronts {
		t.Run(f.name, func(t *testing.T) {
			s, err := l1check.New(setup, f.v(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			contract(t, s)
		})
	}
}

func keys(from, n int) []int { return l1check.Keys(from, n) }

func leasesOf(rs []l1.Result) []l1.Lease {
	out := make([]l1.Lease, len(rs))
	for i, r := range rs {
		out[i] = r.Lease
	}
	return out
}

func want[T comparable](t *testing.T, what string, got []T, err error, w ...T) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("%s: %v, want %v", what, got, w)
	}
}

func statusesOf(rs []l1.Result) []l1.Status {
	out := make([]l1.Status, len(rs))
	for i, r := range rs {
		out[i] = r.Status
	}
	return out
}

// TestSeedRestore: 5700 keys into room for 4560 get exactly 4560 OKs, in
// request order, and 1140 OUT_OF_MEMORY, in one reservation.
func TestSeedRestore(t *testing.T) {
	each(t, l1check.Setup{Units: 4560, Align: 64, Placement: allocator.Scattered}, func(t *testing.T, s *l1check.System) {
		res, err := s.M.ReserveWrite(keys(0, 5700), nil, 64, l1.ModeAll)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if want := l1.OK; i >= 4560 {
				want = l1.OutOfMemory
				if r.Status != want {
					t.Fatalf("key %d: %v, want %v", i, r.Status, want)
				}
			} else if r.Status != want {
				t.Fatalf("key %d: %v, want %v", i, r.Status, want)
			}
		}
		if st := s.M.Stats(); st.OOMKeys != 1140 || st.PartialGrants != 1 || st.WriteLocked != 4560 {
			t.Fatalf("stats %+v", st.Counters)
		}
	})
}

// TestRepeatedKey: a key repeated in one reservation is reserved once.
func TestRepeatedKey(t *testing.T) {
	each(t, l1check.Setup{Units: 16}, func(t *testing.T, s *l1check.System) {
		res, err := s.M.ReserveWrite([]int{1, 2, 1, 1}, nil, 64, l1.ModeAll)
		want(t, "reserve", statusesOf(res), err, l1.OK, l1.OK, l1.KeyNotWritable, l1.KeyNotWritable)
		if st := s.A.Stats(); st.LiveBlocks != 2 {
			t.Fatalf("%d blocks for two keys", st.LiveBlocks)
		}
	})
}

// TestLapsedWriteLease: a writer whose lock lapsed, and whose key another
// writer reserved since, publishes nothing: its FinishWrite answers
// WRITE_LAPSED and frees the block it was filling, which stayed
// quarantined, never handed to the other writer; the other's reservation
// stands. The daemon quarantines lapsed writes, so both front ends do here.
func TestLapsedWriteLease(t *testing.T) {
	each(t, l1check.Setup{Units: 16, WriteTTL: time.Second, Quarantine: true}, func(t *testing.T, s *l1check.System) {
		k := keys(7, 1)
		late, _ := s.M.ReserveWrite(k, nil, 64, l1.ModeAll)
		s.Advance(2 * time.Second)
		now, _ := s.M.ReserveWrite(k, nil, 64, l1.ModeAll)
		if now[0].Status != l1.OK || now[0].Lease == late[0].Lease || now[0].Block.Offset == late[0].Block.Offset {
			t.Fatalf("second writer: %+v; the late writer's block %+v", now[0], late[0].Block)
		}
		if st := s.M.Stats(); st.QuarantinedBytes != 64 {
			t.Fatalf("%d bytes quarantined", st.QuarantinedBytes)
		}
		sts, err := s.M.FinishWrite(k, leasesOf(late))
		want(t, "the late writer finishes", sts, err, l1.WriteLapsed)
		sts, err = s.M.FinishWrite(k, leasesOf(now))
		want(t, "the writer finishes", sts, err, l1.OK)
		if st, ok := s.M.State(k[0]); !ok || st.WriteLocked || !st.Finished || s.M.Stats().QuarantinedBytes != 0 {
			t.Fatalf("%+v, %d quarantined", st, s.M.Stats().QuarantinedBytes)
		}
	})
}

// TestStaleReadLease: readers of one epoch share a lease; a reader whose
// hold lapsed releases nothing of the next epoch's holders.
func TestStaleReadLease(t *testing.T) {
	each(t, l1check.Setup{Units: 16, ReadTTL: time.Second}, func(t *testing.T, s *l1check.System) {
		k := keys(3, 1)
		res, _ := s.M.ReserveWrite(k, nil, 64, l1.ModeAll)
		s.M.FinishWrite(k, leasesOf(res))
		a, _ := s.M.ReserveRead(k, 1)
		b, _ := s.M.ReserveRead(k, 1)
		if a[0].Lease != b[0].Lease {
			t.Fatalf("one epoch, leases %d and %d", a[0].Lease, b[0].Lease)
		}
		s.Advance(2 * time.Second)
		c, _ := s.M.ReserveRead(k, 1)
		if c[0].Lease == a[0].Lease {
			t.Fatal("a lapsed read lock kept its epoch")
		}
		sts, err := s.M.FinishRead(k, leasesOf(a), 1)
		want(t, "a lapsed reader releases", sts, err, l1.StaleLease)
		if st, _ := s.M.State(k[0]); st.ReadLocks != 1 {
			t.Fatalf("%d read locks, want the new reader's 1", st.ReadLocks)
		}
		sts, err = s.M.FinishRead(k, leasesOf(c), 1)
		want(t, "the reader releases", sts, err, l1.OK)
	})
}

// TestReadPrefix: the prefix stops at the first missing key and at the
// first key being written, and locks nothing behind.
func TestReadPrefix(t *testing.T) {
	each(t, l1check.Setup{Units: 32}, func(t *testing.T, s *l1check.System) {
		ks := keys(0, 6)
		res, _ := s.M.ReserveWrite(ks, nil, 64, l1.ModeAll)
		s.M.FinishWrite(ks, leasesOf(res))
		s.M.Delete(ks[3:4], false)
		if fromL2(s) {
			// The contract that differs: L1 lost key 3, L2 holds it, and
			// the read loads it back: the prefix is whole.
			got, n, err := s.M.ReserveReadPrefix(ks, 2)
			want(t, "prefix, key 3 from L2", statusesOf(got), err, l1.OK, l1.OK, l1.OK, l1.OK, l1.OK, l1.OK)
			if loads, _ := daemoncheck.FrontL2Loads(s.M); n != 6 || loads != 1 {
				t.Fatalf("n %d, %d keys loaded from L2; want 6 and 1", n, loads)
			}
			sts, err := s.M.FinishRead(ks, leasesOf(got), 2)
			want(t, "release", sts, err, l1.OK, l1.OK, l1.OK, l1.OK, l1.OK, l1.OK)
			// A key that L2 does not hold either is a miss, as in l1.
			res, _ := s.M.ReserveWrite(keys(20, 1), nil, 64, l1.ModeAll)
			s.M.AbortWrite(keys(20, 1), leasesOf(res))
			ks = append(ks[:3], 20, 4, 5)
		}
		got, n, err := s.M.ReserveReadPrefix(ks, 2)
		want(t, "prefix", statusesOf(got), err, l1.OK, l1.OK, l1.OK, l1.KeyNotExist, l1.Skipped, l1.Skipped)
		if n != 3 {
			t.Fatalf("n %d", n)
		}
		for _, k := range ks[4:] {
			if st, _ := s.M.State(k); st.ReadLocks != 0 {
				t.Fatalf("key %d behind the miss is locked", k)
			}
		}
		s.M.ReserveWrite(keys(10, 1), nil, 64, l1.ModeAll)
		got, n, err = s.M.ReserveReadPrefix([]int{0, 10, 1}, 1)
		want(t, "prefix at a write", statusesOf(got), err, l1.OK, l1.KeyNotReadable, l1.Skipped)
		if n != 1 {
			t.Fatalf("n %d at a write", n)
		}
	})
}

// TestTemporary: a temporary object goes with its last reader's release.
func TestTemporary(t *testing.T) {
	each(t, l1check.Setup{Units: 16}, func(t *testing.T, s *l1check.System) {
		k := keys(5, 1)
		res, _ := s.M.ReserveWrite(k, []bool{true}, 64, l1.ModeAll)
		rr, err := s.M.FinishWriteAndReserveRead(k, leasesOf(res), 2)
		want(t, "finish and read", statusesOf(rr), err, l1.OK)
		sts, err := s.M.FinishRead(k, leasesOf(rr), 1)
		want(t, "release one", sts, err, l1.OK)
		if _, ok := s.M.State(k[0]); !ok {
			t.Fatal("gone with a reader left")
		}
		sts, err = s.M.FinishRead(k, leasesOf(rr), 1)
		want(t, "release the last", sts, err, l1.OK)
		if _, ok := s.M.State(k[0]); ok || s.A.Stats().Used != 0 {
			t.Fatal("a temporary object outlived its last reader")
		}
	})
}

// TestDeleteLocked: a locked object survives a Delete without force; with
// force its key goes at once, and its block when its holders let go.
func TestDeleteLocked(t *testing.T) {
	each(t, l1check.Setup{Units: 16}, func(t *testing.T, s *l1check.System) {
		ks := keys(0, 2)
		res, _ := s.M.ReserveWrite(ks, nil, 64, l1.ModeAll)
		s.M.FinishWrite(ks[:1], leasesOf(res[:1]))
		rr, _ := s.M.ReserveRead(ks[:1], 1)
		sts, err := s.M.Delete(append(ks, 9), false)
		want(t, "delete", sts, err, l1.KeyIsLocked, l1.KeyIsLocked, l1.KeyNotExist)
		sts, err = s.M.Delete(ks, true)
		want(t, "delete with force", sts, err, l1.OK, l1.OK)
		if _, ok := s.M.State(ks[0]); ok || s.A.Stats().Used != 2*64 {
			t.Fatalf("after a forced delete: key present %v, %d bytes used; want the key gone, the blocks held", ok, s.A.Stats().Used)
		}
		sts, err = s.M.FinishWrite(ks[1:], leasesOf(res[1:]))
		want(t, "the writer finishes late", sts, err, l1.WriteDeleted)
		sts, err = s.M.FinishRead(ks[:1], leasesOf(rr), 1)
		want(t, "the reader releases", sts, err, l1.OK)
		if s.A.Stats().Used != 0 {
			t.Fatal("memory left after the holders of a forced delete let go")
		}
	})
}

// TestPartialIsNextVictim: under prefix-aware eviction a chain's partial
// last block goes first when a reservation needs room.
func TestPartialIsNextVictim(t *testing.T) {
	each(t, l1check.Setup{Units: 4, Placement: allocator.Scattered, EvictOnDemand: true, Eviction: l1.EvictPrefix}, func(t *testing.T, s *l1check.System) {
		ks := keys(0, 4)
		res, err := s.M.ReserveWriteChain(ks, []uint32{0, 1, 2, 3 | l1.Partial}, nil, 64, l1.ModeAll)
		want(t, "reserve", statusesOf(res), err, l1.OK, l1.OK, l1.OK, l1.OK)
		s.M.FinishWrite(ks, leasesOf(res))
		res, err = s.M.ReserveWrite(keys(10, 1), nil, 64, l1.ModeAll)
		want(t, "reserve into a full pool", statusesOf(res), err, l1.OK)
		if _, ok := s.M.State(3); ok {
			t.Fatal("the partial block survived; another was evicted")
		}
	})
}

// TestInvalidArguments: a refused call changes nothing, through either
// front end, and its error matches l1.ErrInvalidArgument.
func TestInvalidArguments(t *testing.T) {
	each(t, l1check.Setup{Units: 16}, func(t *testing.T, s *l1check.System) {
		ks := keys(0, 2)
		res, _ := s.M.ReserveWrite(ks, nil, 64, l1.ModeAll)
		before := fmt.Sprint(s.M.Snapshot())
		for name, call := range map[string]func() error{
			"size 0":             func() error { _, err := s.M.ReserveWrite(keys(4, 1), nil, 0, l1.ModeAll); return err },
			"mode 9":             func() error { _, err := s.M.ReserveWrite(keys(4, 1), nil, 64, 9); return err },
			"one flag, two keys": func() error { _, err := s.M.ReserveWrite(keys(4, 2), []bool{true}, 64, l1.ModeAll); return err },
			"one position": func() error {
				_, err := s.M.ReserveWriteChain(keys(4, 2), []uint32{1}, nil, 64, l1.ModeAll)
				return err
			},
			"one lease, two keys": func() error { _, err := s.M.FinishWrite(ks, leasesOf(res[:1])); return err },
			"0 locks":             func() error { _, err := s.M.ReserveRead(ks, 0); return err },
			"129 locks":           func() error { _, err := s.M.FinishRead(ks, leasesOf(res), 129); return err },
			"finish-read 0 locks": func() error { _, err := s.M.FinishWriteAndReserveRead(ks, leasesOf(res), 0); return err },
		} {
			if err := call(); !errors.Is(err, l1.ErrInvalidArgument) {
				t.Errorf("%s: %v, want an error matching l1.ErrInvalidArgument", name, err)
			}
		}
		if after := fmt.Sprint(s.M.Snapshot()); after != before {
			t.Fatalf("refused calls changed the state:\n%s\n%s", before, after)
		}
		sts, err := s.M.FinishWrite(ks, leasesOf(res))
		want(t, "finish", sts, err, l1.OK, l1.OK)
	})
}

// TestTouch: touching makes a key most recently used; a missing key is
// no error.
func TestTouch(t *testing.T) {
	each(t, l1check.Setup{Units: 16}, func(t *testing.T, s *l1check.System) {
		ks := keys(0, 3)
		res, _ := s.M.ReserveWrite(ks, nil, 64, l1.ModeAll)
		s.M.FinishWrite(ks, leasesOf(res))
		if err := s.M.Touch([]int{0, 99}); err != nil {
			t.Fatal(err)
		}
		snap := s.M.Snapshot()
		if got := snap[len(snap)-1].Key; got != 0 {
			t.Fatalf("most recently used %d, want the touched 0", got)
		}
	})
}
