//go:build linux

package client_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// manyKeys are n distinct keys.
func manyKeys(n int) []l1.ObjectKey {
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%08x", i), Model: "m"}
	}
	return ks
}

// TestAnswerAtMaxFrame: the client reads an answer frame of exactly
// MaxFrame bytes whole, as PROTOCOL.md allows every frame, and judges its
// body; one of MaxFrame+1 is refused from its header. No answer of
// protocol version 1 can fill MaxFrame (the largest, MaxKeys results, is
// 2.6 MB), so this one's body is zeros that the decoder refuses as
// trailing bytes: the refusal shows the size passed and the body was read.
// Either way the client is broken, and says so.
func TestAnswerAtMaxFrame(t *testing.T) {
	for _, c := range []struct {
		size uint32
		want error
		says string
	}{
		{wire.MaxFrame, wire.ErrBadFrame, fmt.Sprintf("%d trailing bytes", wire.MaxFrame-wire.HeaderSize)},
		{wire.MaxFrame - 1, wire.ErrBadFrame, fmt.Sprintf("%d trailing bytes", wire.MaxFrame-1-wire.HeaderSize)},
		{wire.MaxFrame + 1, wire.ErrTooLarge, "outside"},
	} {
		t.Run(fmt.Sprint(c.size), func(t *testing.T) {
			f := startFake(t, wire.Hello{}, func(q *wire.Request) []byte {
				b := make([]byte, min(c.size, wire.MaxFrame))
				wire.Header{Size: c.size, Type: q.Type.Answer(), ID: q.ID, Epoch: fakeEpoch}.Put(b)
				return b
			})
			cl := dialFake(t, f)
			err := cl.Ping()
			if !errors.Is(err, client.ErrDisconnected) || !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("ping: %v; want %v saying %q", err, c.want, c.says)
			}
			if err := cl.Ping(); !errors.Is(err, client.ErrDisconnected) {
				t.Fatalf("the ping after: %v; want the client broken", err)
			}
		})
	}
}

// TestLargestAnswers: the largest legal answers, MaxKeys results and
// MaxKeys statuses, are accepted, and one past them is refused.
func TestLargestAnswers(t *testing.T) {
	for _, n := range []int{wire.MaxKeys - 1, wire.MaxKeys, wire.MaxKeys + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := startFake(t, wire.Hello{MaxKeys: wire.MaxKeys + 1}, func(q *wire.Request) []byte {
				a := &wire.Answer{Type: q.Type.Answer(), ID: q.ID, Epoch: fakeEpoch}
				per := 1
				if q.Type.HasResults() {
					a.Results, per = make([]wire.Result, min(n, wire.MaxKeys)), 40
					for i := range a.Results {
						a.Results[i].Status = wire.StatusKeyNotExist
					}
				} else {
					a.Statuses = make([]wire.Status, min(n, wire.MaxKeys))
				}
				b := answerOf(t, a)
				if n > wire.MaxKeys { // by hand: the encoder refuses it
					b = append(b, make([]byte, per)...)
					binary.LittleEndian.PutUint32(b[wire.HeaderSize:], uint32(n))
					binary.LittleEndian.PutUint32(b, uint32(len(b)))
				}
				return b
			})
			cl := dialFake(t, f)
			ks := make([]l1.ObjectKey, min(n, wire.MaxKeys))
			res, err := cl.ReserveRead(ks, 1)
			if n > wire.MaxKeys {
				if !errors.Is(err, client.ErrDisconnected) || !errors.Is(err, wire.ErrBadFrame) {
					t.Fatalf("%d results: %v, want BAD_FRAME", n, err)
				}
				return
			}
			if err != nil || len(res) != n || res[n-1].Status != wire.StatusKeyNotExist {
				t.Fatalf("%d results: %d, %v", n, len(res), err)
			}
			ls := make([]client.Lease, len(ks))
			for i := range ls {
				ls[i].Epoch = cl.Epoch()
			}
			if st, err := cl.FinishWrite(ks, ls); err != nil || len(st) != n {
				t.Fatalf("%d statuses: %d, %v", n, len(st), err)
			}
		})
	}
}
