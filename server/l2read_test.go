//go:build linux

package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// TestLookupWithoutL2: a daemon without an L2 store answers lookup with
// the L1 prefix and no L2 part, locks nothing, and reserve_read_prefix_wait
// is reserve_read_prefix; a wait out of range is INVALID_ARGUMENT and
// leaves the connection usable.
func TestLookupWithoutL2(t *testing.T) {
	s := start(t, server.Config{})
	c := dial(t, s)
	ks := keys("lk", 6)
	res, err := c.ReserveWrite(ks[:4], nil, 4096, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "FinishWrite")(c.FinishWrite(ks[:3], leasesOf(res[:3])))
	// ks[3] is being written: the prefix stops there.
	for _, prefetch := range []bool{false, true} {
		got, err := c.Lookup(ks, prefetch)
		if err != nil {
			t.Fatal(err)
		}
		if want := (wire.Lookup{N: 6, L1: 3}); got != want {
			t.Fatalf("Lookup(prefetch %v) = %+v, want %+v", prefetch, got, want)
		}
	}
	if st, _ := s.Manager().State(ks[0]); st.ReadLocks != 0 {
		t.Fatalf("lookup locked %v: %+v", ks[0], st)
	}
	rr, n, err := c.ReserveReadPrefixWait(ks, 1, 20*time.Millisecond)
	if err != nil || n != 3 || rr[3].Status != wire.StatusKeyNotReadable || rr[4].Status != wire.StatusSkipped {
		t.Fatalf("ReserveReadPrefixWait: %d, %v, %v", n, rr, err)
	}
	for _, w := range []time.Duration{-time.Nanosecond, 10*time.Second + time.Microsecond} {
		if _, _, err := c.ReserveReadPrefixWait(ks, 1, w); !errors.Is(err, wire.ErrInvalidArgument) {
			t.Fatalf("wait %v: %v, want INVALID_ARGUMENT", w, err)
		}
	}
	allOK(t, "FinishRead")(c.FinishRead(ks[:3], leasesOf(rr[:3]), 1))
	allOK(t, "AbortWrite")(c.AbortWrite(ks[3:4], leasesOf(res[3:4])))
	check(t, s)
}
