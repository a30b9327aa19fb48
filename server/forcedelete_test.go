//go:build linux

package server_test

import (
	"bytes"
	"testing"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// A forced delete over the socket never takes a block from under another
// connection's lock (wire/PROTOCOL.md, "What a connection owns"). Three
// real connections: A holds the key, C deletes it with force, B writes it
// again; a reader must read B's bytes whatever A does late.

const forceSize = 1 << 20

// fill writes pattern over the whole block through c's mapping.
func fill(t testing.TB, c *client.Client, b client.Block, pattern byte) {
	t.Helper()
	buf, err := c.Bytes(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = pattern
	}
}

// holds reports whether every byte of b, read through c's mapping, is
// pattern.
func holds(t testing.TB, c *client.Client, b client.Block, pattern byte) bool {
	t.Helper()
	buf, err := c.Bytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return len(buf) > 0 && bytes.Count(buf, []byte{pattern}) == len(buf)
}

// quarantined checks the daemon's quarantined bytes.
func quarantined(t testing.TB, s *server.Server, what string, want uint64) {
	t.Helper()
	if got := s.Stats().QuarantinedBytes; got != want {
		t.Fatalf("%s: %d bytes quarantined, want %d", what, got, want)
	}
	check(t, s)
}

// readBack read-locks k on c and requires B's bytes in B's block.
func readBack(t testing.TB, c *client.Client, k []l1.ObjectKey, b client.Block, pattern byte) {
	t.Helper()
	rr, err := c.ReserveRead(k, 1)
	if err != nil || rr[0].Status != wire.StatusOK {
		t.Fatalf("the reader: %+v, %v", rr, err)
	}
	if rr[0].Block.Offset != b.Offset {
		t.Fatalf("the reader got block %+v, the last writer wrote %+v", rr[0].Block, b)
	}
	if !holds(t, c, rr[0].Block, pattern) {
		t.Fatalf("the reader read another writer's bytes in %+v", rr[0].Block)
	}
	allOK(t, "the reader releases")(c.FinishRead(k, leasesOf(rr), 1))
}

// TestForcedDeleteOfAnotherConnsWrite: C deletes with force a key that A
// holds write-reserved; B reserves the key and writes; A writes into its
// old block and then finishes (WRITE_DELETED, nothing published), aborts
// (OK) or disconnects. B's block is its own, and the reader reads B's
// bytes. Before the rule, B got A's block, and A's late bytes were what
// the reader read under its own lock.
func TestForcedDeleteOfAnotherConnsWrite(t *testing.T) {
	for _, late := range []string{"finish_write", "finish_write_and_reserve_read", "abort_write", "disconnect"} {
		t.Run(late, func(t *testing.T) {
			s := start(t, server.Config{})
			a, b, c := dial(t, s), dial(t, s), dial(t, s)
			k := keys("force-w", 1)
			ra, err := a.ReserveWrite(k, nil, forceSize, l1.ModeAll)
			if err != nil || ra[0].Status != wire.StatusOK {
				t.Fatalf("A reserves: %+v, %v", ra, err)
			}
			sts, err := c.Delete(k, true)
			statuses(t, "C deletes A's write with force", sts, err, wire.StatusOK)
			if _, ok := s.Manager().State(k[0]); ok {
				t.Fatal("the key outlived its forced delete")
			}
			quarantined(t, s, "after the delete", forceSize)

			rb, err := b.ReserveWrite(k, nil, forceSize, l1.ModeAll)
			if err != nil || rb[0].Status != wire.StatusOK {
				t.Fatalf("B reserves: %+v, %v", rb, err)
			}
			if x, y := ra[0].Block, rb[0].Block; x.Offset < y.Offset+y.Size && y.Offset < x.Offset+x.Size {
				t.Fatalf("B got %+v, A's held block %+v", y, x)
			}
			fill(t, b, rb[0].Block, 'B')
			fill(t, a, ra[0].Block, 'A') // A, late, still writing
			allOK(t, "B finishes")(b.FinishWrite(k, leasesOf(rb)))

			before := s.Stats().ConnsClosed
			switch late {
			case "finish_write":
				sts, err = a.FinishWrite(k, leasesOf(ra))
				statuses(t, "A finishes its deleted write", sts, err, wire.StatusWriteDeleted)
			case "finish_write_and_reserve_read":
				rr, err := a.FinishWriteAndReserveRead(k, leasesOf(ra), 1)
				if err != nil || rr[0].Status != wire.StatusWriteDeleted || rr[0].Lease != (client.Lease{}) {
					t.Fatalf("A publishes its deleted write: %+v, %v", rr, err)
				}
			case "abort_write":
				sts, err = a.AbortWrite(k, leasesOf(ra))
				statuses(t, "A aborts its deleted write", sts, err, wire.StatusOK)
			case "disconnect":
				a.Close()
				waitClosed(t, s, before+1)
			}
			quarantined(t, s, "after A let go", 0)
			if late != "disconnect" {
				// A's record went with the answer.
				sts, err = a.AbortWrite(k, leasesOf(ra))
				statuses(t, "A aborts again", sts, err, wire.StatusNotOwner)
			}
			readBack(t, c, k, rb[0].Block, 'B')
			if st := s.Stats(); st.UsedBytes != forceSize {
				t.Fatalf("%d bytes used, want B's object alone", st.UsedBytes)
			}
		})
	}
}

// TestForcedDeleteOfAnotherConnsRead: C deletes with force a key that A
// holds read-locked; B writes the key again. A's block keeps A's bytes
// until A lets go: its finish_read answers OK (not KEY_NOT_EXIST) and
// frees the block, or its disconnect does; its ledger record goes either
// way. The reader reads B's bytes.
func TestForcedDeleteOfAnotherConnsRead(t *testing.T) {
	for _, late := range []string{"finish_read", "disconnect"} {
		t.Run(late, func(t *testing.T) {
			s := start(t, server.Config{})
			a, b, c := dial(t, s), dial(t, s), dial(t, s)
			k := keys("force-r", 1)
			ra, err := a.ReserveWrite(k, nil, forceSize, l1.ModeAll)
			if err != nil || ra[0].Status != wire.StatusOK {
				t.Fatalf("A reserves: %+v, %v", ra, err)
			}
			fill(t, a, ra[0].Block, 'A')
			allOK(t, "A finishes")(a.FinishWrite(k, leasesOf(ra)))
			rl, err := a.ReserveRead(k, 2)
			if err != nil || rl[0].Status != wire.StatusOK {
				t.Fatalf("A read-locks: %+v, %v", rl, err)
			}
			sts, err := c.Delete(k, true)
			statuses(t, "C deletes A's read with force", sts, err, wire.StatusOK)
			quarantined(t, s, "after the delete", forceSize)

			rb, err := b.ReserveWrite(k, nil, forceSize, l1.ModeAll)
			if err != nil || rb[0].Status != wire.StatusOK {
				t.Fatalf("B reserves: %+v, %v", rb, err)
			}
			if rb[0].Block.Offset == rl[0].Block.Offset {
				t.Fatalf("B got A's read-locked block %+v", rl[0].Block)
			}
			fill(t, b, rb[0].Block, 'B')
			allOK(t, "B finishes")(b.FinishWrite(k, leasesOf(rb)))
			if !holds(t, a, rl[0].Block, 'A') {
				t.Fatal("A's read-locked block changed under it")
			}

			before := s.Stats().ConnsClosed
			switch late {
			case "finish_read":
				sts, err = a.FinishRead(k, leasesOf(rl), 1)
				statuses(t, "A releases one hold", sts, err, wire.StatusOK)
				quarantined(t, s, "one hold left", forceSize)
				sts, err = a.FinishRead(k, leasesOf(rl), 1)
				statuses(t, "A releases the last", sts, err, wire.StatusOK)
				sts, err = a.FinishRead(k, leasesOf(rl), 1)
				statuses(t, "A releases again", sts, err, wire.StatusNotOwner)
			case "disconnect":
				a.Close()
				waitClosed(t, s, before+1)
				if st := s.Stats(); st.ReleasedReadLocks != 2 {
					t.Fatalf("the disconnect released %d read locks, want 2", st.ReleasedReadLocks)
				}
			}
			quarantined(t, s, "after A let go", 0)
			readBack(t, c, k, rb[0].Block, 'B')
		})
	}
}
