//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"os"

	"github.com/kvalloc/kvalloc/bench/trace"
)

// request is one request of the trace as a client replays it.
type request struct {
	blocks []int32 // the prompt's blocks, dense numbers (trace.Request.Blocks)
	// partial: the last block's tokens do not fill it (input_length <
	// blocks × block tokens): reserve_write marks it l1.Partial.
	partial bool
}

// The requests file is the trace as the clients read it, so that a
// restarted client loads its share in a millisecond instead of parsing
// the trace: "KVSOAKR1", the request count (uint32), then per request its
// block count with bit 31 set for a partial last block (uint32) and its
// blocks (int32 each), little-endian.
const requestsMagic = "KVSOAKR1"

const partialBit = 1 << 31

// writeRequests writes tr's requests, in arrival order, to path.
func writeRequests(path string, tr *trace.Trace) error {
	out := append([]byte(requestsMagic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(out[len(requestsMagic):], uint32(len(tr.Requests)))
	for i := range tr.Requests {
		r := &tr.Requests[i]
		n := uint32(len(r.Blocks))
		if r.Input < int64(len(r.Blocks))*tr.BlockTokens {
			n |= partialBit
		}
		out = binary.LittleEndian.AppendUint32(out, n)
		for _, b := range r.Blocks {
			out = binary.LittleEndian.AppendUint32(out, uint32(b))
		}
	}
	return os.WriteFile(path, out, 0o600)
}

// readRequests reads the requests file.
func readRequests(path string) ([]request, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := errors.New("the requests file is malformed")
	if len(data) < len(requestsMagic)+4 || string(data[:len(requestsMagic)]) != requestsMagic {
		return nil, bad
	}
	count := int(binary.LittleEndian.Uint32(data[len(requestsMagic):]))
	data = data[len(requestsMagic)+4:]
	out := make([]request, 0, count)
	for range count {
		if len(data) < 4 {
			return nil, bad
		}
		h := binary.LittleEndian.Uint32(data)
		nb := int(h &^ partialBit)
		data = data[4:]
		if len(data) < 4*nb || nb == 0 {
			return nil, bad
		}
		r := request{blocks: make([]int32, nb), partial: h&partialBit != 0}
		for j := range r.blocks {
			r.blocks[j] = int32(binary.LittleEndian.Uint32(data[4*j:]))
		}
		out = append(out, r)
		data = data[4*nb:]
	}
	if len(data) != 0 || count == 0 {
		return nil, bad
	}
	return out, nil
}
