package fuzz

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// FuzzFrameDecoder feeds any bytes to the frame decoder of kvallocd's
// protocol, as a request and as an answer, and checks that it never panics,
// that a refusal is an *wire.Error with a code the decoder may give, and
// that whatever it accepts encodes again and decodes to the same message;
// then the same with a borrowing decoder (wire.Decoder.Borrow), whose
// reserve_write keys must still own their chunk hashes: they must not
// change when the frame's bytes do; then the same with a decoder of a
// version 2 connection, which also accepts calls by handle, the handles of
// results and the versions of a hello answer (a version 1 decoder must
// accept none of them).
// The seeds are every request and answer type, valid, plus malformed ones,
// in both versions.
func FuzzFrameDecoder(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkFrame(data, &wire.Decoder{}); err != nil {
			t.Fatal(err)
		}
		if err := checkFrame(data, &wire.Decoder{Borrow: true}); err != nil {
			t.Fatalf("borrowing decoder: %v", err)
		}
		if err := checkFrame(data, &wire.Decoder{Borrow: true, Version: wire.Version2}); err != nil {
			t.Fatalf("version 2 decoder: %v", err)
		}
	})
}

// versionOf is the protocol version a decoder under test decodes: its
// Version, for a *wire.Decoder; 1 for the broken ones.
func versionOf(d frameDecoder) uint32 {
	if wd, ok := d.(*wire.Decoder); ok && wd.Version >= wire.Version2 {
		return wd.Version
	}
	return wire.Version
}

// frameDecoder is the decoder under test: *wire.Decoder, or a broken one
// (internal/reference/mutant).
type frameDecoder interface {
	DecodeRequest(frame []byte, q *wire.Request) error
	DecodeAnswer(frame []byte, a *wire.Answer) error
}

// checkFrame is FuzzFrameDecoder's body.
func checkFrame(data []byte, d frameDecoder) error {
	var e wire.Encoder
	var q, q2 wire.Request
	frame := slices.Clone(data) // overwritten below
	switch err := d.DecodeRequest(frame, &q); {
	case err != nil:
		if err := refusal(err, wire.CodeBadFrame, wire.CodeTooLarge, wire.CodeUnknownType, wire.CodeBadVersion); err != nil {
			return fmt.Errorf("request: %w", err)
		}
	default:
		// The keys, copied: a borrowing decoder's alias the frame, and
		// the decoder's slice is reused by the decoding below.
		kept := make([]l1.ObjectKey, len(q.Keys))
		for i, k := range q.Keys {
			kept[i] = l1.ObjectKey{ChunkHash: strings.Clone(k.ChunkHash), Model: strings.Clone(k.Model),
				CacheSalt: strings.Clone(k.CacheSalt), KVRank: k.KVRank, GroupID: k.GroupID}
		}
		for i := range frame {
			frame[i] = ^frame[i]
		}
		if q.Type == wire.TypeReserveWrite && !slices.Equal(q.Keys, kept) {
			return fmt.Errorf("request %v: its keys changed with the frame's bytes: a manager keeps them", q.Type)
		}
		q.Keys = kept
		if q.ByHandles() && versionOf(d) < wire.Version2 {
			return fmt.Errorf("request %v: a version 1 decoder accepted a call by handle", q.Type)
		}
		if err := wellFormed(&q); err != nil {
			return fmt.Errorf("request %v: %w", q.Type, err)
		}
		b, err := e.AppendRequest(nil, &q)
		if err != nil {
			return fmt.Errorf("request %v decoded but does not encode: %w", q.Type, err)
		}
		if len(b) > len(data) {
			return fmt.Errorf("request %v: the canonical encoding (%d bytes) is longer than the frame (%d)", q.Type, len(b), len(data))
		}
		if err := d.DecodeRequest(b, &q2); err != nil || !q.Equal(&q2) {
			return fmt.Errorf("request %v: re-encoded, it decodes to %+v (%v), not %+v", q.Type, q2, err, q)
		}
	}
	var a, a2 wire.Answer
	switch err := d.DecodeAnswer(data, &a); {
	case err != nil:
		if err := refusal(err, wire.CodeBadFrame, wire.CodeTooLarge, wire.CodeUnknownType); err != nil {
			return fmt.Errorf("answer: %w", err)
		}
	default:
		b, err := e.AppendAnswer(nil, &a)
		if err != nil {
			return fmt.Errorf("answer %v decoded but does not encode: %w", a.Type, err)
		}
		if err := d.DecodeAnswer(b, &a2); err != nil || !a.Equal(&a2) {
			return fmt.Errorf("answer %v: re-encoded, it decodes to %+v (%v), not %+v", a.Type, a2, err, a)
		}
		if versionOf(d) < wire.Version2 && a.Hello.Versions != 0 {
			return fmt.Errorf("answer %v: a version 1 decoder accepted a hello answer's versions", a.Type)
		}
		for i, r := range a.Results {
			if versionOf(d) < wire.Version2 && r.Handle != 0 {
				return fmt.Errorf("answer %v: a version 1 decoder accepted result %d's handle %d", a.Type, i, r.Handle)
			}
		}
		if (a.Code == wire.CodeOK) != (a.Err() == nil) {
			return fmt.Errorf("answer %v: code %v but Err %v", a.Type, a.Code, a.Err())
		}
	}
	return nil
}

// refusal checks a decoding error: an *wire.Error with one of codes and a
// message.
func refusal(err error, codes ...wire.Code) error {
	var we *wire.Error
	if !errors.As(err, &we) {
		return fmt.Errorf("refused with %T %v, not a *wire.Error", err, err)
	}
	for _, c := range codes {
		if we.Code == c && we.Msg != "" {
			return nil
		}
	}
	return fmt.Errorf("refused with code %v (%q), not one of %v", we.Code, we.Msg, codes)
}

// wellFormed checks what a decoded request promises its server.
func wellFormed(q *wire.Request) error {
	n := len(q.Keys)
	if q.ByHandles() {
		switch {
		case !q.Type.ByHandle():
			return fmt.Errorf("%v by handle", q.Type)
		case len(q.Keys) != 0 || len(q.Temporary) != 0 || len(q.Positions) != 0 || len(q.Sizes) != 0:
			return fmt.Errorf("a call by handle with %d keys", len(q.Keys))
		case len(q.Handles) > wire.MaxKeys:
			return fmt.Errorf("%d handles", len(q.Handles))
		case len(q.Leases) != len(q.Handles):
			return fmt.Errorf("%d leases for %d handles", len(q.Leases), len(q.Handles))
		}
		return nil
	}
	switch {
	case len(q.Handles) != 0:
		return fmt.Errorf("%d handles without the flag", len(q.Handles))
	case !q.Type.Known() || q.Type&wire.AnswerBit != 0:
		return fmt.Errorf("type %v", q.Type)
	case n > wire.MaxKeys:
		return fmt.Errorf("%d keys", n)
	case q.Flags&wire.FlagTemporary != 0 && len(q.Temporary) != n, q.Flags&wire.FlagTemporary == 0 && len(q.Temporary) != 0:
		return fmt.Errorf("%d temporary flags for %d keys, flags %#x", len(q.Temporary), n, q.Flags)
	case q.Flags&wire.FlagPositions != 0 && len(q.Positions) != n, q.Flags&wire.FlagPositions == 0 && len(q.Positions) != 0:
		return fmt.Errorf("%d positions for %d keys, flags %#x", len(q.Positions), n, q.Flags)
	case q.Flags&wire.FlagSizes != 0 && len(q.Sizes) != n, q.Flags&wire.FlagSizes == 0 && len(q.Sizes) != 0:
		return fmt.Errorf("%d expected sizes for %d keys, flags %#x", len(q.Sizes), n, q.Flags)
	case q.Flags&wire.FlagSizes != 0 && q.Type != wire.TypeLookup && q.Type != wire.TypeReserveReadPrefixWait:
		return fmt.Errorf("expected sizes on %v", q.Type)
	case q.Type.HasLeases() && len(q.Leases) != n, !q.Type.HasLeases() && len(q.Leases) != 0:
		return fmt.Errorf("%d leases for %d keys", len(q.Leases), n)
	case q.Type == wire.TypeHello && (q.Version < wire.Version || q.Version > wire.MaxVersion):
		return fmt.Errorf("hello of version %d accepted", q.Version)
	}
	for i, k := range q.Keys {
		if len(k.ChunkHash) > wire.MaxStringLen || len(k.Model) > wire.MaxStringLen || len(k.CacheSalt) > wire.MaxStringLen {
			return fmt.Errorf("key %d has a string over the limit", i)
		}
	}
	return nil
}

// frameSeeds encodes one frame of every request and answer type, and some
// that break a rule.
func frameSeeds() []seed {
	var e wire.Encoder
	keys := []l1.ObjectKey{
		{ChunkHash: "\x00\x01\x02\x03\x04\x05\x06\x07", Model: "llama-3.1-70b"},
		{ChunkHash: "\xff\xfe", Model: "llama-3.1-70b", KVRank: 3, GroupID: 7, CacheSalt: "tenant-a"},
		{Model: "qwen2-7b", KVRank: 1},
	}
	leases := []l1.Lease{1, 2, 3}
	const epoch = 0x0123456789abcdef
	reqs := map[string]wire.Request{
		"hello":                          {Type: wire.TypeHello, ID: 1, Version: wire.Version},
		"ping":                           {Type: wire.TypePing, ID: 2, Epoch: epoch},
		"stats":                          {Type: wire.TypeStats, ID: 3, Epoch: epoch},
		"reserve_write":                  {Type: wire.TypeReserveWrite, ID: 4, Epoch: epoch, Size: 8 << 20, Keys: keys},
		"reserve_write_chain":            {Type: wire.TypeReserveWrite, ID: 5, Epoch: epoch, Size: 4096, Mode: l1.ModeNew, Keys: keys, Temporary: []bool{true, false, true}, Positions: []uint32{0, 1, 2 | l1.Partial}},
		"finish_write":                   {Type: wire.TypeFinishWrite, ID: 6, Epoch: epoch, Keys: keys, Leases: leases},
		"abort_write":                    {Type: wire.TypeAbortWrite, ID: 7, Epoch: epoch, Keys: keys[:1], Leases: leases[:1]},
		"finish_write_and_reserve_read":  {Type: wire.TypeFinishWriteAndReserveRead, ID: 8, Epoch: epoch, Locks: 2, Keys: keys, Leases: leases},
		"reserve_read":                   {Type: wire.TypeReserveRead, ID: 9, Epoch: epoch, Locks: 1, Keys: keys},
		"reserve_read_prefix":            {Type: wire.TypeReserveReadPrefix, ID: 10, Epoch: epoch, Locks: 1, Keys: keys},
		"finish_read":                    {Type: wire.TypeFinishRead, ID: 11, Epoch: epoch, Locks: 1, Keys: keys, Leases: leases},
		"delete":                         {Type: wire.TypeDelete, ID: 12, Epoch: epoch, Flags: wire.FlagForce, Keys: keys},
		"touch":                          {Type: wire.TypeTouch, ID: 13, Epoch: epoch, Keys: keys},
		"lookup":                         {Type: wire.TypeLookup, ID: 15, Epoch: epoch, Flags: wire.FlagPrefetch, Keys: keys},
		"reserve_read_prefix_wait":       {Type: wire.TypeReserveReadPrefixWait, ID: 16, Epoch: epoch, Size: 250000, Locks: 1, Keys: keys},
		"lookup_sizes":                   {Type: wire.TypeLookup, ID: 17, Epoch: epoch, Size: 1500, Flags: wire.FlagPrefetch, Keys: keys, Sizes: []int64{128 << 10, 128 << 10, 5000}},
		"reserve_read_prefix_wait_sizes": {Type: wire.TypeReserveReadPrefixWait, ID: 18, Epoch: epoch, Size: 250000, Locks: 1, Keys: keys, Sizes: []int64{128 << 10, 128 << 10, 5000}},
		// Version 2.
		"v2_hello":                                 {Type: wire.TypeHello, ID: 1, Version: wire.Version2},
		"v2_finish_write_handles":                  {Type: wire.TypeFinishWrite, ID: 6, Epoch: epoch, Handles: []uint32{1, 2, 0xffffffff}, Leases: leases},
		"v2_abort_write_handles":                   {Type: wire.TypeAbortWrite, ID: 7, Epoch: epoch, Handles: []uint32{0}, Leases: leases[:1]},
		"v2_finish_write_and_reserve_read_handles": {Type: wire.TypeFinishWriteAndReserveRead, ID: 8, Epoch: epoch, Locks: 2, Handles: []uint32{2, 1}, Leases: leases[:2]},
		"v2_finish_read_handles":                   {Type: wire.TypeFinishRead, ID: 11, Epoch: epoch, Locks: 1, Handles: []uint32{3, 1, 2}, Leases: leases},
		"v2_delete_handles":                        {Type: wire.TypeDelete, ID: 12, Epoch: epoch, Flags: wire.FlagForce, Handles: []uint32{1}, Leases: leases[:1]},
	}
	ok := wire.Result{Status: wire.StatusOK, Block: allocator.Block{Offset: 4096, Size: 4096, Gen: 9}, Lease: 5}
	answers := map[string]wire.Answer{
		"hello_answer":               {Type: wire.TypeHello.Answer(), ID: 1, Epoch: epoch, Hello: wire.Hello{Version: wire.Version, MaxKeys: wire.MaxKeys, MaxFrame: wire.MaxFrame, PoolSize: 1 << 30, Align: 4096}},
		"not_allowed":                {Type: wire.TypeHello.Answer(), Epoch: epoch, Code: wire.CodeNotAllowed, Message: "peer pid 1 uid 2 gid 3 is not allowed"},
		"ping_answer":                {Type: wire.TypePing.Answer(), ID: 2, Epoch: epoch},
		"stats_answer":               {Type: wire.TypeStats.Answer(), ID: 3, Epoch: epoch, Stats: wire.Stats{Objects: 1, UsedBytes: 4096}},
		"reserve_write_answer":       {Type: wire.TypeReserveWrite.Answer(), ID: 4, Epoch: epoch, Results: []wire.Result{ok, {Status: wire.StatusOutOfMemory}}},
		"finish_write_answer":        {Type: wire.TypeFinishWrite.Answer(), ID: 6, Epoch: epoch, Statuses: []wire.Status{wire.StatusOK, wire.StatusNotOwner}},
		"abort_write_answer":         {Type: wire.TypeAbortWrite.Answer(), ID: 7, Epoch: epoch, Statuses: []wire.Status{wire.StatusOK}},
		"fwrr_answer":                {Type: wire.TypeFinishWriteAndReserveRead.Answer(), ID: 8, Epoch: epoch, Results: []wire.Result{ok}},
		"reserve_read_answer":        {Type: wire.TypeReserveRead.Answer(), ID: 9, Epoch: epoch, Results: []wire.Result{ok, {Status: wire.StatusKeyNotExist}}},
		"reserve_read_prefix_answer": {Type: wire.TypeReserveReadPrefix.Answer(), ID: 10, Epoch: epoch, Prefix: 1, Results: []wire.Result{ok, {Status: wire.StatusKeyNotExist}, {Status: wire.StatusSkipped}}},
		"finish_read_answer":         {Type: wire.TypeFinishRead.Answer(), ID: 11, Epoch: epoch, Statuses: []wire.Status{wire.StatusOverRelease}},
		"delete_answer":              {Type: wire.TypeDelete.Answer(), ID: 12, Epoch: epoch, Statuses: []wire.Status{wire.StatusKeyIsLocked}},
		"touch_answer":               {Type: wire.TypeTouch.Answer(), ID: 13, Epoch: epoch},
		"lookup_answer":              {Type: wire.TypeLookup.Answer(), ID: 15, Epoch: epoch, Lookup: wire.Lookup{N: 3, L1: 1, L2: 2, Prefetch: 2}},
		"wait_answer":                {Type: wire.TypeReserveReadPrefixWait.Answer(), ID: 16, Epoch: epoch, Prefix: 1, Results: []wire.Result{ok, {Status: wire.StatusKeyNotReadable}, {Status: wire.StatusSkipped}}},
		"error_answer":               {Type: wire.TypeError, Epoch: epoch, Code: wire.CodeTooLarge, Message: "frame size 1 outside [24, 16777216]"},
		"wrong_epoch_answer":         {Type: wire.TypeFinishWrite.Answer(), ID: 14, Epoch: epoch, Code: wire.CodeWrongEpoch, Message: "epoch"},
		// Version 2.
		"v2_hello_answer":         {Type: wire.TypeHello.Answer(), ID: 1, Epoch: epoch, Hello: wire.Hello{Version: wire.Version2, MaxKeys: wire.MaxKeys, MaxFrame: wire.MaxFrame, Versions: wire.Versions, PoolSize: 1 << 30, Align: 4096}},
		"v2_reserve_write_answer": {Type: wire.TypeReserveWrite.Answer(), ID: 4, Epoch: epoch, Results: []wire.Result{{Status: wire.StatusOK, Block: ok.Block, Lease: 5, Handle: 1}, {Status: wire.StatusOutOfMemory}}},
		"v2_reserve_read_answer":  {Type: wire.TypeReserveRead.Answer(), ID: 9, Epoch: epoch, Results: []wire.Result{{Status: wire.StatusOK, Block: ok.Block, Lease: 6, Handle: 0xffffffff}}},
	}
	var out []seed
	for name, q := range reqs {
		b, err := e.AppendRequest(nil, &q)
		if err != nil {
			panic(fmt.Sprintf("seed %s: %v", name, err))
		}
		out = append(out, seed{"request-" + name, b})
	}
	for name, a := range answers {
		b, err := e.AppendAnswer(nil, &a)
		if err != nil {
			panic(fmt.Sprintf("seed %s: %v", name, err))
		}
		out = append(out, seed{"answer-" + name, b})
	}
	rw := out[0].data
	for _, s := range out {
		if s.name == "request-reserve_write" {
			rw = s.data
		}
	}
	bad := func(name string, f func([]byte) []byte) {
		out = append(out, seed{"bad-" + name, f(append([]byte(nil), rw...))})
	}
	bad("truncated", func(b []byte) []byte { return b[:len(b)-3] })
	bad("key-count-overruns", func(b []byte) []byte { b[wire.HeaderSize+16] = 9; return b })
	bad("unknown-type", func(b []byte) []byte { b[4] = 0x7f; return b })
	bad("size-too-large", func(b []byte) []byte { b[3] = 0xff; return b })
	return out
}

func init() {
	seeds := frameSeeds()
	slices.SortFunc(seeds, func(a, b seed) int { return strings.Compare(a.name, b.name) })
	seedSets["FuzzFrameDecoder"] = seeds
}
