package wire_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// The conformance vectors: every request and answer type as bytes, with
// its decoded form in JSON, and malformed frames with the code a decoder
// must refuse them with. Clients in other languages run the same file
// (PROTOCOL.md, "Conformance vectors").
const vectorsPath = "../testdata/wire/vectors.json"

// vector is one entry of vectors.json.
type vector struct {
	Name    string          `json:"name"`
	Kind    string          `json:"kind"` // "request" or "answer"
	Frame   string          `json:"frame"`
	Message json.RawMessage `json:"message,omitempty"`
	Error   string          `json:"error,omitempty"` // the Code a decoder refuses the frame with
	// Version is the protocol version of the connection the frame is
	// one of: 2 for the v2_ and bad_v2_ entries; left out (1) otherwise.
	Version uint32 `json:"version,omitempty"`
}

// jsonKey is l1.ObjectKey in the vectors: the chunk hash in hex.
type jsonKey struct {
	ChunkHash string `json:"chunk_hash"`
	Model     string `json:"model"`
	KVRank    uint32 `json:"kv_rank"`
	GroupID   uint32 `json:"group_id"`
	CacheSalt string `json:"cache_salt"`
}

type jsonRequest struct {
	Type      string    `json:"type"`
	ID        uint32    `json:"id"`
	Epoch     uint64    `json:"epoch"`
	Version   uint32    `json:"version,omitempty"`
	Size      int64     `json:"size,omitempty"`
	Locks     uint32    `json:"locks,omitempty"`
	Mode      uint8     `json:"mode,omitempty"`
	Flags     uint8     `json:"flags,omitempty"`
	Keys      []jsonKey `json:"keys,omitempty"`
	Temporary []bool    `json:"temporary,omitempty"`
	Positions []uint32  `json:"positions,omitempty"`
	Sizes     []int64   `json:"sizes,omitempty"`
	Handles   []uint32  `json:"handles,omitempty"`
	Leases    []uint64  `json:"leases,omitempty"`
}

type jsonResult struct {
	Status string `json:"status"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	Gen    uint64 `json:"gen"`
	Lease  uint64 `json:"lease"`
	Handle uint32 `json:"handle,omitempty"`
}

type jsonHello struct {
	Version  uint32 `json:"version"`
	MaxKeys  uint32 `json:"max_keys"`
	MaxFrame uint32 `json:"max_frame"`
	PoolSize int64  `json:"pool_size"`
	Align    int64  `json:"align"`
	Versions uint32 `json:"versions,omitempty"`
}

type jsonAnswer struct {
	Type     string            `json:"type"`
	ID       uint32            `json:"id"`
	Code     string            `json:"code"`
	Epoch    uint64            `json:"epoch"`
	Message  string            `json:"message,omitempty"`
	Hello    *jsonHello        `json:"hello,omitempty"`
	Results  []jsonResult      `json:"results,omitempty"`
	Prefix   uint32            `json:"prefix,omitempty"`
	Statuses []string          `json:"statuses,omitempty"`
	Stats    map[string]uint64 `json:"stats,omitempty"`
	Lookup   *jsonLookup       `json:"lookup,omitempty"`
}

type jsonLookup struct {
	N        uint32 `json:"n"`
	L1       uint32 `json:"l1"`
	L2       uint32 `json:"l2"`
	Prefetch uint32 `json:"prefetch"`
}

func typeName(t wire.Type) string {
	if t == wire.TypeError {
		return "error"
	}
	return t.Request().String()
}

func requestJSON(q *wire.Request) jsonRequest {
	j := jsonRequest{Type: typeName(q.Type), ID: q.ID, Epoch: q.Epoch, Version: q.Version, Size: q.Size,
		Locks: q.Locks, Mode: uint8(q.Mode), Flags: q.Flags, Temporary: q.Temporary, Positions: q.Positions, Sizes: q.Sizes, Handles: q.Handles}
	// The flags a decoder reports include the ones the slices imply.
	if len(q.Temporary) > 0 {
		j.Flags |= wire.FlagTemporary
	}
	if len(q.Positions) > 0 {
		j.Flags |= wire.FlagPositions
	}
	if len(q.Sizes) > 0 {
		j.Flags |= wire.FlagSizes
	}
	if q.ByHandles() {
		j.Flags |= wire.FlagHandles
	}
	for _, k := range q.Keys {
		j.Keys = append(j.Keys, jsonKey{hex.EncodeToString([]byte(k.ChunkHash)), k.Model, k.KVRank, k.GroupID, k.CacheSalt})
	}
	for _, l := range q.Leases {
		j.Leases = append(j.Leases, uint64(l))
	}
	return j
}

func answerJSON(a *wire.Answer) jsonAnswer {
	j := jsonAnswer{Type: typeName(a.Type), ID: a.ID, Code: a.Code.String(), Epoch: a.Epoch, Message: a.Message, Prefix: a.Prefix}
	if a.Code != wire.CodeOK {
		return j
	}
	switch a.Type.Request() {
	case wire.TypeHello:
		h := a.Hello
		j.Hello = &jsonHello{h.Version, h.MaxKeys, h.MaxFrame, h.PoolSize, h.Align, h.Versions}
	case wire.TypeStats:
		j.Stats = map[string]uint64{}
		for i, v := range a.Stats.Values() {
			j.Stats[wire.StatsNames[i]] = v
		}
	case wire.TypeLookup:
		l := a.Lookup
		j.Lookup = &jsonLookup{l.N, l.L1, l.L2, l.Prefetch}
	}
	for _, r := range a.Results {
		j.Results = append(j.Results, jsonResult{r.Status.String(), r.Block.Offset, r.Block.Size, r.Block.Gen, uint64(r.Lease), r.Handle})
	}
	for _, s := range a.Statuses {
		j.Statuses = append(j.Statuses, s.String())
	}
	return j
}

// Keys of the vectors: two models, a salt, an empty hash, every byte value.
var (
	keyA = l1.ObjectKey{ChunkHash: "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f", Model: "llama-3.1-70b", KVRank: 0, GroupID: 0}
	keyB = l1.ObjectKey{ChunkHash: "\xff\xfe\xfd\xfc", Model: "llama-3.1-70b", KVRank: 3, GroupID: 7, CacheSalt: "tenant-a"}
	keyC = l1.ObjectKey{ChunkHash: "", Model: "qwen2-7b", KVRank: 0xffffffff, GroupID: 1}
)

const (
	vecEpoch = 0x0123456789abcdef
	mib8     = 8 << 20
)

func requests() []struct {
	name string
	q    wire.Request
} {
	keys := []l1.ObjectKey{keyA, keyB, keyC}
	leases := []l1.Lease{1, 2, 0xfedcba9876543210}
	return []struct {
		name string
		q    wire.Request
	}{
		{"hello", wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version}},
		{"ping", wire.Request{Type: wire.TypePing, ID: 2, Epoch: vecEpoch}},
		{"stats", wire.Request{Type: wire.TypeStats, ID: 3, Epoch: vecEpoch}},
		{"reserve_write", wire.Request{Type: wire.TypeReserveWrite, ID: 4, Epoch: vecEpoch, Size: mib8, Mode: l1.ModeAll, Keys: keys}},
		{"reserve_write_new_temporary_positions", wire.Request{Type: wire.TypeReserveWrite, ID: 5, Epoch: vecEpoch, Size: 4096, Mode: l1.ModeNew,
			Keys: keys, Temporary: []bool{false, true, false}, Positions: []uint32{0, 1, 2 | l1.Partial}}},
		{"reserve_write_empty", wire.Request{Type: wire.TypeReserveWrite, ID: 6, Epoch: vecEpoch, Size: 1, Mode: l1.ModeUpdate}},
		{"finish_write", wire.Request{Type: wire.TypeFinishWrite, ID: 7, Epoch: vecEpoch, Keys: keys, Leases: leases}},
		{"abort_write", wire.Request{Type: wire.TypeAbortWrite, ID: 8, Epoch: vecEpoch, Keys: keys[:1], Leases: leases[:1]}},
		{"finish_write_and_reserve_read", wire.Request{Type: wire.TypeFinishWriteAndReserveRead, ID: 9, Epoch: vecEpoch, Locks: 2, Keys: keys[1:], Leases: leases[1:]}},
		{"reserve_read", wire.Request{Type: wire.TypeReserveRead, ID: 10, Epoch: vecEpoch, Locks: 1, Keys: keys}},
		{"reserve_read_prefix", wire.Request{Type: wire.TypeReserveReadPrefix, ID: 11, Epoch: vecEpoch, Locks: 128, Keys: keys}},
		{"finish_read", wire.Request{Type: wire.TypeFinishRead, ID: 12, Epoch: vecEpoch, Locks: 1, Keys: keys, Leases: leases}},
		{"delete", wire.Request{Type: wire.TypeDelete, ID: 13, Epoch: vecEpoch, Keys: keys}},
		{"delete_force", wire.Request{Type: wire.TypeDelete, ID: 14, Epoch: vecEpoch, Flags: wire.FlagForce, Keys: keys[2:]}},
		{"touch", wire.Request{Type: wire.TypeTouch, ID: 15, Epoch: vecEpoch, Keys: keys}},
		{"lookup", wire.Request{Type: wire.TypeLookup, ID: 18, Epoch: vecEpoch, Keys: keys}},
		{"lookup_prefetch", wire.Request{Type: wire.TypeLookup, ID: 19, Epoch: vecEpoch, Flags: wire.FlagPrefetch, Keys: keys}},
		{"reserve_read_prefix_wait", wire.Request{Type: wire.TypeReserveReadPrefixWait, ID: 20, Epoch: vecEpoch, Size: 250000, Locks: 1, Keys: keys}},
		{"lookup_prefetch_sizes", wire.Request{Type: wire.TypeLookup, ID: 21, Epoch: vecEpoch, Size: 1500, Flags: wire.FlagPrefetch,
			Keys: keys, Sizes: []int64{128 << 10, 128 << 10, 5000}}},
		{"reserve_read_prefix_wait_sizes", wire.Request{Type: wire.TypeReserveReadPrefixWait, ID: 22, Epoch: vecEpoch, Size: 250000, Locks: 1,
			Keys: keys, Sizes: []int64{128 << 10, 128 << 10, 5000}}},
	}
}

func answers() []struct {
	name string
	a    wire.Answer
} {
	ok := func(off int64, gen uint64, lease l1.Lease) wire.Result {
		return wire.Result{Status: wire.StatusOK, Block: allocator.Block{Offset: off, Size: mib8, Gen: gen}, Lease: lease}
	}
	var stats wire.Stats
	vals := stats.Values()
	for i := range vals {
		vals[i] = uint64(i + 1)
	}
	stats.SetValues(vals)
	a := func(t wire.Type, id uint32) wire.Answer {
		return wire.Answer{Type: t.Answer(), ID: id, Epoch: vecEpoch}
	}
	with := func(x wire.Answer, f func(*wire.Answer)) wire.Answer { f(&x); return x }
	return []struct {
		name string
		a    wire.Answer
	}{
		{"hello_answer", with(a(wire.TypeHello, 1), func(x *wire.Answer) {
			x.Hello = wire.Hello{Version: wire.Version, MaxKeys: wire.MaxKeys, MaxFrame: wire.MaxFrame, PoolSize: 45 << 30, Align: 4096}
		})},
		{"hello_not_allowed", with(a(wire.TypeHello, 0), func(x *wire.Answer) {
			x.Code, x.Message = wire.CodeNotAllowed, "peer uid 65534 gid 65534 (pid 4242) is not allowed; allowed uids [0] gids []"
		})},
		{"hello_too_many_connections", with(a(wire.TypeHello, 0), func(x *wire.Answer) {
			x.Code, x.Message = wire.CodeTooManyConnections, "uid 1000 has 512 connections open, the most this kvallocd serves one uid (flag -max-conns-per-uid)"
		})},
		{"hello_bad_version", with(a(wire.TypeHello, 1), func(x *wire.Answer) {
			x.Code, x.Message = wire.CodeBadVersion, "protocol version 9; this daemon speaks 1"
		})},
		{"ping_answer", a(wire.TypePing, 2)},
		{"reserve_read_busy", with(a(wire.TypeReserveRead, 13), func(x *wire.Answer) {
			x.Code, x.Message = wire.CodeBusy, "no frame buffer of 1048576 bytes within 10s: the daemon's 268435456 bytes of frame buffers are in use; nothing was done, send the request again"
		})},
		{"stats_answer", with(a(wire.TypeStats, 3), func(x *wire.Answer) { x.Stats = stats })},
		{"reserve_write_answer", with(a(wire.TypeReserveWrite, 4), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 100), ok(mib8, 2, 101), {Status: wire.StatusOutOfMemory}}
		})},
		{"finish_write_answer", with(a(wire.TypeFinishWrite, 7), func(x *wire.Answer) {
			x.Statuses = []wire.Status{wire.StatusOK, wire.StatusNotOwner, wire.StatusStaleLease, wire.StatusWriteLapsed}
		})},
		{"abort_write_answer", with(a(wire.TypeAbortWrite, 8), func(x *wire.Answer) {
			x.Statuses = []wire.Status{wire.StatusKeyNotExist}
		})},
		{"finish_write_and_reserve_read_answer", with(a(wire.TypeFinishWriteAndReserveRead, 9), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(mib8, 2, 102), {Status: wire.StatusKeyInWrongState}}
		})},
		{"reserve_read_answer", with(a(wire.TypeReserveRead, 10), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 103), {Status: wire.StatusKeyNotReadable}, {Status: wire.StatusKeyNotExist}}
		})},
		{"reserve_read_prefix_answer", with(a(wire.TypeReserveReadPrefix, 11), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 103), {Status: wire.StatusKeyNotExist}, {Status: wire.StatusSkipped}}
			x.Prefix = 1
		})},
		{"finish_read_answer", with(a(wire.TypeFinishRead, 12), func(x *wire.Answer) {
			x.Statuses = []wire.Status{wire.StatusOK, wire.StatusOverRelease, wire.StatusNotOwner}
		})},
		{"delete_answer", with(a(wire.TypeDelete, 13), func(x *wire.Answer) {
			x.Statuses = []wire.Status{wire.StatusOK, wire.StatusKeyIsLocked, wire.StatusKeyNotExist}
		})},
		{"touch_answer", a(wire.TypeTouch, 15)},
		{"lookup_answer", with(a(wire.TypeLookup, 19), func(x *wire.Answer) {
			x.Lookup = wire.Lookup{N: 3, L1: 1, L2: 2, Prefetch: 1}
		})},
		{"reserve_read_prefix_wait_answer", with(a(wire.TypeReserveReadPrefixWait, 20), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 103), ok(mib8, 2, 104), {Status: wire.StatusKeyNotReadable}}
			x.Prefix = 2
		})},
		{"reserve_read_prefix_wait_size_mismatch_answer", with(a(wire.TypeReserveReadPrefixWait, 22), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 105), {Status: wire.StatusSizeMismatch}, {Status: wire.StatusSkipped}}
			x.Prefix = 1
		})},
		{"wrong_epoch", with(a(wire.TypeFinishWrite, 16), func(x *wire.Answer) {
			x.Code, x.Message = wire.CodeWrongEpoch, "epoch 0x1 is not this daemon's 0x123456789abcdef: leases and blocks from an earlier daemon are void"
		})},
		{"error_too_large", wire.Answer{Type: wire.TypeError, Code: wire.CodeTooLarge, Epoch: vecEpoch,
			Message: "frame size 4294967295 outside [24, 16777216]"}},
		{"invalid_argument", with(a(wire.TypeReserveRead, 17), func(x *wire.Answer) {
			x.Code, x.Message = wire.CodeInvalidArgument, "l1: invalid argument: read locks 0 outside [1, 128]"
		})},
	}
}

// v2Requests are version 2's requests: the hello that asks for it and the
// calls by handle, extreme handles included.
func v2Requests() []struct {
	name string
	q    wire.Request
} {
	leases := []l1.Lease{100, 101, 0xfedcba9876543210}
	return []struct {
		name string
		q    wire.Request
	}{
		{"v2_hello", wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version2}},
		{"v2_finish_write_handles", wire.Request{Type: wire.TypeFinishWrite, ID: 7, Epoch: vecEpoch, Handles: []uint32{1, 2, 0xffffffff}, Leases: leases}},
		{"v2_abort_write_handles", wire.Request{Type: wire.TypeAbortWrite, ID: 8, Epoch: vecEpoch, Handles: []uint32{0}, Leases: leases[:1]}},
		{"v2_finish_write_and_reserve_read_handles", wire.Request{Type: wire.TypeFinishWriteAndReserveRead, ID: 9, Epoch: vecEpoch, Locks: 2,
			Handles: []uint32{2, 1}, Leases: leases[:2]}},
		{"v2_finish_read_handles", wire.Request{Type: wire.TypeFinishRead, ID: 12, Epoch: vecEpoch, Locks: 1, Handles: []uint32{3, 1, 2}, Leases: []l1.Lease{103, 104, 104}}},
		{"v2_finish_read_handles_empty", wire.Request{Type: wire.TypeFinishRead, ID: 21, Epoch: vecEpoch, Locks: 1, Flags: wire.FlagHandles}},
		{"v2_delete_handles", wire.Request{Type: wire.TypeDelete, ID: 13, Epoch: vecEpoch, Handles: []uint32{1, 2}, Leases: leases[:2]}},
		{"v2_delete_handles_force", wire.Request{Type: wire.TypeDelete, ID: 14, Epoch: vecEpoch, Flags: wire.FlagForce, Handles: []uint32{7}, Leases: []l1.Lease{1}}},
		// A call by key is as in version 1 on a version 2 connection.
		{"v2_finish_write_keys", wire.Request{Type: wire.TypeFinishWrite, ID: 22, Epoch: vecEpoch, Keys: []l1.ObjectKey{keyA}, Leases: leases[:1]}},
	}
}

// v2Answers are version 2's answers: the hello answer with its versions,
// and results with their handles.
func v2Answers() []struct {
	name string
	a    wire.Answer
} {
	ok := func(off int64, gen uint64, lease l1.Lease, h uint32) wire.Result {
		return wire.Result{Status: wire.StatusOK, Block: allocator.Block{Offset: off, Size: mib8, Gen: gen}, Lease: lease, Handle: h}
	}
	a := func(t wire.Type, id uint32) wire.Answer {
		return wire.Answer{Type: t.Answer(), ID: id, Epoch: vecEpoch}
	}
	with := func(x wire.Answer, f func(*wire.Answer)) wire.Answer { f(&x); return x }
	return []struct {
		name string
		a    wire.Answer
	}{
		{"v2_hello_answer", with(a(wire.TypeHello, 1), func(x *wire.Answer) {
			x.Hello = wire.Hello{Version: wire.Version2, MaxKeys: wire.MaxKeys, MaxFrame: wire.MaxFrame, Versions: wire.Versions, PoolSize: 45 << 30, Align: 4096}
		})},
		{"v2_reserve_write_answer", with(a(wire.TypeReserveWrite, 4), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 100, 1), ok(mib8, 2, 101, 2), {Status: wire.StatusOutOfMemory}}
		})},
		{"v2_finish_write_answer", with(a(wire.TypeFinishWrite, 7), func(x *wire.Answer) {
			x.Statuses = []wire.Status{wire.StatusOK, wire.StatusOK, wire.StatusNotOwner}
		})},
		{"v2_finish_write_and_reserve_read_answer", with(a(wire.TypeFinishWriteAndReserveRead, 9), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(mib8, 2, 102, 2), {Status: wire.StatusNotOwner}}
		})},
		{"v2_reserve_read_answer", with(a(wire.TypeReserveRead, 10), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 103, 0xffffffff), {Status: wire.StatusKeyNotReadable}, ok(2*mib8, 3, 104, 1)}
		})},
		{"v2_reserve_read_prefix_answer", with(a(wire.TypeReserveReadPrefix, 11), func(x *wire.Answer) {
			x.Results = []wire.Result{ok(0, 1, 103, 3), {Status: wire.StatusKeyNotExist}, {Status: wire.StatusSkipped}}
			x.Prefix = 1
		})},
		{"v2_finish_read_answer", with(a(wire.TypeFinishRead, 12), func(x *wire.Answer) {
			x.Statuses = []wire.Status{wire.StatusOK, wire.StatusOverRelease, wire.StatusNotOwner}
		})},
		{"v2_delete_answer", with(a(wire.TypeDelete, 13), func(x *wire.Answer) {
			x.Statuses = []wire.Status{wire.StatusOK, wire.StatusNotOwner}
		})},
	}
}

// requestEncoder returns a function that encodes a request, failing t on
// an error.
func requestEncoder(t testing.TB) func(wire.Request) []byte {
	var e wire.Encoder
	return func(q wire.Request) []byte {
		b, err := e.AppendRequest(nil, &q)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// edit returns f applied to a copy of b.
func edit(b []byte, f func([]byte) []byte) []byte { return f(slices.Clone(b)) }

// v2Malformed lists the frames a version 2 decoder must refuse, and the
// version 2 frames a version 1 decoder must refuse.
func v2Malformed(t testing.TB) []vector {
	enc := requestEncoder(t)
	fw := enc(wire.Request{Type: wire.TypeFinishWrite, ID: 7, Epoch: vecEpoch, Handles: []uint32{1, 2}, Leases: []l1.Lease{100, 101}})
	rr := enc(wire.Request{Type: wire.TypeReserveRead, ID: 10, Epoch: vecEpoch, Locks: 1, Keys: []l1.ObjectKey{keyA}})
	var ea wire.Encoder
	res, err := ea.AppendAnswer(nil, &wire.Answer{Type: wire.TypeReserveRead.Answer(), ID: 10, Epoch: vecEpoch,
		Results: []wire.Result{{Status: wire.StatusOK, Block: allocator.Block{Size: mib8, Gen: 1}, Lease: 103, Handle: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	const handlesAt = wire.HeaderSize + 16 // the handles block
	v := func(name string, version uint32, code wire.Code, b []byte) vector {
		return vector{Name: name, Kind: "request", Frame: hex.EncodeToString(b), Error: code.String(), Version: version}
	}
	return []vector{
		v("bad_v2_handle_count_overruns", 2, wire.CodeBadFrame, edit(fw, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[handlesAt:], 3)
			return b
		})),
		v("bad_v2_handle_count_over_limit", 2, wire.CodeBadFrame, edit(fw, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[handlesAt:], wire.MaxKeys+1)
			return b
		})),
		v("bad_v2_handles_reserved", 2, wire.CodeBadFrame, edit(fw, func(b []byte) []byte { b[handlesAt+4] = 1; return b })),
		v("bad_v2_handles_truncated", 2, wire.CodeBadFrame, fw[:len(fw)-8]),
		v("bad_v2_handles_trailing", 2, wire.CodeBadFrame, edit(fw, func(b []byte) []byte {
			b = append(b, 0, 0, 0, 0)
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		})),
		v("bad_v2_handles_unused_parameter", 2, wire.CodeBadFrame, edit(fw, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[wire.HeaderSize+8:], 1) // locks in a finish_write
			return b
		})),
		v("bad_v2_handles_flag_on_reserve_read", 2, wire.CodeBadFrame, edit(rr, func(b []byte) []byte { b[wire.HeaderSize+13] = wire.FlagHandles; return b })),
		v("bad_v2_hello_version_3", 2, wire.CodeBadVersion, edit(enc(wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version2}), func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[wire.HeaderSize+4:], 3)
			return b
		})),
		{Name: "bad_v2_result_reserved", Kind: "answer", Version: 2, Error: wire.CodeBadFrame.String(),
			Frame: hex.EncodeToString(edit(res, func(b []byte) []byte { b[wire.HeaderSize+8+3] = 1; return b }))},
		v("bad_v1_handles_flag", 0, wire.CodeBadFrame, fw),
		{Name: "bad_v1_result_handle", Kind: "answer", Error: wire.CodeBadFrame.String(), Frame: hex.EncodeToString(res)},
	}
}

// malformed lists frames a decoder must refuse, and with which code.
func malformed(t testing.TB) []vector {
	enc := requestEncoder(t)
	rw := enc(wire.Request{Type: wire.TypeReserveWrite, ID: 4, Epoch: vecEpoch, Size: mib8, Keys: []l1.ObjectKey{keyA, keyB}})
	fw := enc(wire.Request{Type: wire.TypeFinishWrite, ID: 7, Epoch: vecEpoch, Keys: []l1.ObjectKey{keyA}, Leases: []l1.Lease{1}})
	tmp := enc(wire.Request{Type: wire.TypeReserveWrite, ID: 5, Epoch: vecEpoch, Size: 64, Keys: []l1.ObjectKey{keyA}, Temporary: []bool{true}})
	hello := enc(wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version})
	ping := enc(wire.Request{Type: wire.TypePing, ID: 2, Epoch: vecEpoch})
	lookup := enc(wire.Request{Type: wire.TypeLookup, ID: 19, Epoch: vecEpoch, Flags: wire.FlagPrefetch, Keys: []l1.ObjectKey{keyA}})
	sized := enc(wire.Request{Type: wire.TypeReserveReadPrefixWait, ID: 22, Epoch: vecEpoch, Locks: 1, Keys: []l1.ObjectKey{keyA}, Sizes: []int64{4096}})
	read := enc(wire.Request{Type: wire.TypeReserveReadPrefix, ID: 11, Epoch: vecEpoch, Locks: 1, Keys: []l1.ObjectKey{keyA}})
	const keysAt = wire.HeaderSize + 16 // the key block of a keyed request
	v := func(name string, code wire.Code, b []byte) vector {
		return vector{Name: name, Kind: "request", Frame: hex.EncodeToString(b), Error: code.String()}
	}
	return []vector{
		v("bad_truncated_header", wire.CodeBadFrame, ping[:10]),
		v("bad_size_over_max", wire.CodeTooLarge, edit(ping, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, wire.MaxFrame+1)
			return b
		})),
		v("bad_size_under_header", wire.CodeTooLarge, edit(ping, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b, 8)
			return b
		})),
		v("bad_unknown_type", wire.CodeUnknownType, edit(ping, func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[4:], 0x0099)
			return b
		})),
		v("bad_header_reserved", wire.CodeBadFrame, edit(ping, func(b []byte) []byte { b[6] = 1; return b })),
		v("bad_request_with_code", wire.CodeBadFrame, edit(ping, func(b []byte) []byte { b[12] = 1; return b })),
		v("bad_answer_as_request", wire.CodeBadFrame, edit(ping, func(b []byte) []byte { b[5] = 0x80; return b })),
		v("bad_body_truncated", wire.CodeBadFrame, rw[:len(rw)-5]),
		v("bad_trailing_bytes", wire.CodeBadFrame, edit(ping, func(b []byte) []byte {
			b = append(b, 0)
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		})),
		v("bad_key_count_overruns", wire.CodeBadFrame, edit(rw, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[keysAt:], 3)
			return b
		})),
		v("bad_key_count_over_limit", wire.CodeBadFrame, edit(rw, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[keysAt:], wire.MaxKeys+1)
			return b
		})),
		v("bad_string_index", wire.CodeBadFrame, edit(rw, func(b []byte) []byte {
			// The first key follows the header, the parameters, the
			// keys block's 8 bytes, the table's three strings (model, "",
			// salt) and the key's hash length.
			off := keysAt + 8 + 2 + len(keyA.Model) + 2 + 2 + len(keyB.CacheSalt) + 2 // the model index
			binary.LittleEndian.PutUint16(b[off:], 9)
			return b
		})),
		v("bad_string_length_overruns", wire.CodeBadFrame, edit(rw, func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[keysAt+8:], 4000)
			return b
		})),
		v("bad_string_over_limit", wire.CodeBadFrame, edit(rw, func(b []byte) []byte {
			binary.LittleEndian.PutUint16(b[keysAt+8:], wire.MaxStringLen+1)
			return b
		})),
		v("bad_unused_parameter", wire.CodeBadFrame, edit(fw, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[wire.HeaderSize+8:], 1) // locks in a finish_write
			return b
		})),
		v("bad_lookup_locks", wire.CodeBadFrame, edit(lookup, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[wire.HeaderSize+8:], 1) // lookup takes no locks
			return b
		})),
		v("bad_lookup_flag", wire.CodeBadFrame, edit(lookup, func(b []byte) []byte { b[wire.HeaderSize+13] = wire.FlagForce; return b })),
		v("bad_sizes_truncated", wire.CodeBadFrame, edit(sized, func(b []byte) []byte {
			b = b[:len(b)-1] // the expected size is one byte short
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		})),
		v("bad_sizes_missing", wire.CodeBadFrame, edit(sized, func(b []byte) []byte {
			b = b[:len(b)-8] // the flag says sizes follow; none do
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		})),
		v("bad_sizes_flag_on_reserve_read_prefix", wire.CodeBadFrame, edit(read, func(b []byte) []byte {
			b[wire.HeaderSize+13] = wire.FlagSizes // only lookup and reserve_read_prefix_wait take it
			b = binary.LittleEndian.AppendUint64(b, 4096)
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			return b
		})),
		v("bad_undefined_flag", wire.CodeBadFrame, edit(rw, func(b []byte) []byte { b[wire.HeaderSize+13] = wire.FlagForce; return b })),
		v("bad_temporary_flag_value", wire.CodeBadFrame, edit(tmp, func(b []byte) []byte { b[len(b)-1] = 2; return b })),
		v("bad_hello_version", wire.CodeBadVersion, edit(hello, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[wire.HeaderSize+4:], 9)
			return b
		})),
		v("bad_hello_magic", wire.CodeBadVersion, edit(hello, func(b []byte) []byte { b[wire.HeaderSize] = 'X'; return b })),
	}
}

// buildVectors encodes every vector.
func buildVectors(t testing.TB) []vector {
	var e wire.Encoder
	var out []vector
	for _, r := range requests() {
		b, err := e.AppendRequest(nil, &r.q)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		msg, _ := json.Marshal(requestJSON(&r.q))
		out = append(out, vector{Name: r.name, Kind: "request", Frame: hex.EncodeToString(b), Message: msg})
	}
	for _, a := range answers() {
		b, err := e.AppendAnswer(nil, &a.a)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		msg, _ := json.Marshal(answerJSON(&a.a))
		out = append(out, vector{Name: a.name, Kind: "answer", Frame: hex.EncodeToString(b), Message: msg})
	}
	out = append(out, malformed(t)...)
	for _, r := range v2Requests() {
		b, err := e.AppendRequest(nil, &r.q)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		msg, _ := json.Marshal(requestJSON(&r.q))
		out = append(out, vector{Name: r.name, Kind: "request", Frame: hex.EncodeToString(b), Message: msg, Version: wire.Version2})
	}
	for _, a := range v2Answers() {
		b, err := e.AppendAnswer(nil, &a.a)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		msg, _ := json.Marshal(answerJSON(&a.a))
		out = append(out, vector{Name: a.name, Kind: "answer", Frame: hex.EncodeToString(b), Message: msg, Version: wire.Version2})
	}
	return append(out, v2Malformed(t)...)
}

func marshalVectors(vs []vector) []byte {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, v := range vs {
		line, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		b.WriteString("  ")
		b.Write(line)
		if i < len(vs)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// TestVectors checks the committed vectors against the codec: every valid
// frame encodes from its message and decodes back to it, and every
// malformed frame is refused with its code. With KVALLOC_UPDATE_VECTORS=1
// it rewrites the file instead (after a change to the protocol, which
// PROTOCOL.md's history must then record).
func TestVectors(t *testing.T) {
	want := marshalVectors(buildVectors(t))
	if os.Getenv("KVALLOC_UPDATE_VECTORS") == "1" {
		if err := os.MkdirAll(filepath.Dir(vectorsPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("%v (run with KVALLOC_UPDATE_VECTORS=1 to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: the codec encodes the vectors differently (run with KVALLOC_UPDATE_VECTORS=1 and record the change in PROTOCOL.md's history)", vectorsPath)
	}
	var vs []vector
	if err := json.Unmarshal(got, &vs); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) { checkVector(t, v) })
		if v.Error == "" {
			var m struct{ Type string }
			_ = json.Unmarshal(v.Message, &m)
			kinds[v.Kind+" "+m.Type] = true
		}
	}
	for _, typ := range wire.Types {
		for _, kind := range []string{"request", "answer"} {
			if !kinds[kind+" "+typ.String()] {
				t.Errorf("no vector for the %s of %v", kind, typ)
			}
		}
	}
}

// checkVector decodes v's frame and compares it with v's message (or
// error), then encodes the decoded message and compares the bytes.
func checkVector(t *testing.T, v vector) {
	frame, err := hex.DecodeString(v.Frame)
	if err != nil {
		t.Fatal(err)
	}
	d := wire.Decoder{Version: v.Version}
	var e wire.Encoder
	if v.Kind == "request" {
		var q wire.Request
		err := d.DecodeRequest(frame, &q)
		if v.Error != "" {
			var we *wire.Error
			if !errors.As(err, &we) || we.Code.String() != v.Error {
				t.Fatalf("decoded with error %v, want %s", err, v.Error)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(requestJSON(&q))
		if !jsonEqual(got, v.Message) {
			t.Fatalf("decoded %s\nwant    %s", got, v.Message)
		}
		b, err := e.AppendRequest(nil, &q)
		if err != nil || !bytes.Equal(b, frame) {
			t.Fatalf("re-encoded %x (%v)\nwant %x", b, err, frame)
		}
		return
	}
	var a wire.Answer
	err = d.DecodeAnswer(frame, &a)
	if v.Error != "" {
		var we *wire.Error
		if !errors.As(err, &we) || we.Code.String() != v.Error {
			t.Fatalf("decoded with error %v, want %s", err, v.Error)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(answerJSON(&a))
	if !jsonEqual(got, v.Message) {
		t.Fatalf("decoded %s\nwant    %s", got, v.Message)
	}
	b, err := e.AppendAnswer(nil, &a)
	if err != nil || !bytes.Equal(b, frame) {
		t.Fatalf("re-encoded %x (%v)\nwant %x", b, err, frame)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestVectorsNamesUnique guards the file's use as a table by name.
func TestVectorsNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range buildVectors(t) {
		if seen[v.Name] {
			t.Errorf("vector %q twice", v.Name)
		}
		seen[v.Name] = true
	}
	if len(seen) < 40 {
		t.Errorf("only %d vectors", len(seen))
	}
}
