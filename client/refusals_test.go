//go:build linux

package client_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// TestTheHellosLimits: a request over the daemon's MaxKeys or MaxFrame,
// as its hello announced them, is refused before anything is sent, with
// INVALID_ARGUMENT, and the client goes on; at the limits it is sent.
func TestTheHellosLimits(t *testing.T) {
	const maxKeys, maxFrame = 4, 1024
	f := startFake(t, wire.Hello{MaxKeys: maxKeys, MaxFrame: maxFrame}, func(q *wire.Request) []byte {
		a := &wire.Answer{Type: q.Type.Answer(), ID: q.ID, Epoch: fakeEpoch}
		if q.Type.HasResults() {
			a.Results = make([]wire.Result, len(q.Keys))
		}
		return answerOf(t, a)
	})
	cl := dialFake(t, f)
	if _, err := cl.ReserveRead(manyKeys(maxKeys), 1); err != nil {
		t.Fatalf("%d keys: %v", maxKeys, err)
	}
	// A touch of exactly maxFrame bytes: 24 + 16 + 8 + table ("" , "m":
	// 2 + 3) + one key of 16 + hash.
	hash := strings.Repeat("h", maxFrame-(wire.HeaderSize+16+8+5+16))
	if err := cl.Touch([]l1.ObjectKey{{ChunkHash: hash, Model: "m"}}); err != nil {
		t.Fatalf("a frame of the hello's MaxFrame: %v", err)
	}
	if got := f.sent(); len(got) != 2 {
		t.Fatalf("the fake got %v", got)
	}
	for name, call := range map[string]func() error{
		"MaxKeys+1 keys": func() error { _, err := cl.ReserveRead(manyKeys(maxKeys+1), 1); return err },
		"MaxKeys+1 keys to finish": func() error {
			ls := make([]client.Lease, maxKeys+1)
			for i := range ls {
				ls[i].Epoch = cl.Epoch()
			}
			_, err := cl.FinishWrite(manyKeys(maxKeys+1), ls)
			return err
		},
		"a frame of MaxFrame+1": func() error { return cl.Touch([]l1.ObjectKey{{ChunkHash: hash + "h", Model: "m"}}) },
	} {
		if err := call(); !errors.Is(err, wire.ErrInvalidArgument) || errors.Is(err, client.ErrDisconnected) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if err := cl.Ping(); err != nil {
		t.Fatalf("ping after the refusals: %v", err)
	}
	if got := f.sent(); len(got) != 1 || got[0] != wire.TypePing {
		t.Fatalf("the fake got %v after the refusals; want the ping alone", got)
	}
}

// TestAnswerCountMismatch: an answer with more or fewer results or
// statuses than the request's keys is the daemon's fault, not data: the
// client is broken, and returns none of it.
func TestAnswerCountMismatch(t *testing.T) {
	for _, delta := range []int{-1, 1} {
		for _, ty := range []wire.Type{wire.TypeReserveRead, wire.TypeReserveWrite, wire.TypeFinishWrite, wire.TypeDelete} {
			t.Run(fmt.Sprint(ty, delta), func(t *testing.T) {
				f := startFake(t, wire.Hello{}, func(q *wire.Request) []byte {
					a := &wire.Answer{Type: q.Type.Answer(), ID: q.ID, Epoch: fakeEpoch}
					if q.Type.HasResults() {
						a.Results = make([]wire.Result, len(q.Keys)+delta)
					} else {
						a.Statuses = make([]wire.Status, len(q.Keys)+delta)
					}
					return answerOf(t, a)
				})
				cl := dialFake(t, f)
				ks := manyKeys(3)
				ls := make([]client.Lease, 3)
				for i := range ls {
					ls[i].Epoch = cl.Epoch()
				}
				var n int
				var err error
				switch ty {
				case wire.TypeReserveRead:
					var res []client.Result
					res, err = cl.ReserveRead(ks, 1)
					n = len(res)
				case wire.TypeReserveWrite:
					var res []client.Result
					res, err = cl.ReserveWrite(ks, nil, 4096, l1.ModeAll)
					n = len(res)
				case wire.TypeFinishWrite:
					var st []client.Status
					st, err = cl.FinishWrite(ks, ls)
					n = len(st)
				case wire.TypeDelete:
					var st []client.Status
					st, err = cl.Delete(ks, false)
					n = len(st)
				}
				if !errors.Is(err, client.ErrDisconnected) || n != 0 {
					t.Fatalf("%d answers to 3 keys: %d returned, %v; want none and the client broken", 3+delta, n, err)
				}
				if err := cl.Ping(); !errors.Is(err, client.ErrDisconnected) {
					t.Fatalf("ping after: %v", err)
				}
			})
		}
	}
}
