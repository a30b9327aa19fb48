//go:build linux

package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/wire"
)

// TestSizedCallsCarryTheSizes: LookupSized and ReserveReadPrefixWaitSized
// send one expected size per key (FlagSizes), the plain calls none, and
// a SIZE_MISMATCH result comes back as such, with no block. Sizes that
// are not one per key, or below 1, are refused before anything is sent,
// and the connection stays usable.
func TestSizedCallsCarryTheSizes(t *testing.T) {
	type seen struct {
		t     wire.Type
		flags uint8
		sizes []int64
	}
	got := make(chan seen, 16)
	f := startFake(t, wire.Hello{}, func(q *wire.Request) []byte {
		got <- seen{q.Type, q.Flags, slices.Clone(q.Sizes)}
		a := &wire.Answer{Type: q.Type.Answer(), ID: q.ID, Epoch: fakeEpoch}
		switch q.Type {
		case wire.TypeLookup:
			a.Lookup = wire.Lookup{N: uint32(len(q.Keys))}
		case wire.TypeReserveReadPrefixWait:
			a.Results = make([]wire.Result, len(q.Keys))
			for i := range a.Results {
				a.Results[i].Status = wire.StatusSkipped
			}
			a.Results[0].Status = wire.StatusSizeMismatch
		}
		return answerOf(t, a)
	})
	c := dialFake(t, f)
	ks := manyKeys(3)
	want := []int64{128 << 10, 128 << 10, 5000}
	if _, err := c.LookupSized(ks, want, true, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.t != wire.TypeLookup || s.flags != wire.FlagPrefetch|wire.FlagSizes || !slices.Equal(s.sizes, want) {
		t.Fatalf("lookup sent %+v, want the prefetch and sizes flags and %v", s, want)
	}
	res, p, err := c.ReserveReadPrefixWaitSized(ks, want, 1, time.Millisecond)
	if err != nil || p != 0 || res[0].Status != wire.StatusSizeMismatch || res[0].Block != (client.Block{}) || res[0].Lease.ID != 0 {
		t.Fatalf("the SIZE_MISMATCH answer: %v, %d, %v", res, p, err)
	}
	if s := <-got; s.t != wire.TypeReserveReadPrefixWait || s.flags != wire.FlagSizes || !slices.Equal(s.sizes, want) {
		t.Fatalf("reserve_read_prefix_wait sent %+v, want the sizes flag and %v", s, want)
	}
	if _, err := c.Lookup(ks, false); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s.flags != 0 || len(s.sizes) != 0 {
		t.Fatalf("a plain lookup sent %+v", s)
	}
	for _, bad := range [][]int64{{1, 2}, {1, 0, 1}, {1, 1, -4096}, {}} {
		_, err := c.LookupSized(ks, bad, false, 0)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeInvalidArgument {
			t.Fatalf("LookupSized with sizes %v: %v, want INVALID_ARGUMENT", bad, err)
		}
		_, _, err = c.ReserveReadPrefixWaitSized(ks, bad, 1, 0)
		if !errors.As(err, &we) || we.Code != wire.CodeInvalidArgument {
			t.Fatalf("ReserveReadPrefixWaitSized with sizes %v: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
	if err := c.Ping(); err != nil {
		t.Fatalf("ping after the refusals: %v", err)
	}
	select {
	case s := <-got:
		if s.t != wire.TypePing {
			t.Fatalf("a refused call reached the daemon: %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the ping never reached the fake")
	}
}
