package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrFormat wraps every rejection of a trace file: a line that is not a
// JSON object of the Mooncake format, a missing or out-of-range field, or a
// hash_ids list that does not match input_length. The message names the
// file and the line.
var ErrFormat = errors.New("trace: malformed trace file")

// DefaultBlockTokens is the tokens per KV block of the Mooncake traces: one
// hash id stands for 512 prompt tokens.
const DefaultBlockTokens = 512

// maxMillis is the largest timestamp, in ms, whose nanoseconds fit an
// int64.
const maxMillis = math.MaxInt64 / 1_000_000

// maxLine bounds one JSON line (a request of about a million blocks).
const maxLine = 16 << 20

// Request is one line of a trace.
type Request struct {
	// Arrival is the request's timestamp in nanoseconds since the start
	// of the trace (the file's timestamp is in milliseconds).
	Arrival int64
	// Input and Output are input_length and output_length, in tokens.
	Input, Output int64
	// Blocks are the request's prompt blocks in order, as dense block
	// numbers: the file's hash ids renumbered 0, 1, 2, ... in order of
	// first appearance, so that per-block state fits in slices.
	Blocks []int32
	// Line is the request's line in the file, for messages.
	Line int
}

// Trace is a parsed trace file: its requests in arrival order (a stable
// sort of the file's lines by timestamp).
type Trace struct {
	Name        string
	Requests    []Request
	BlockTokens int64
	// Distinct is the number of distinct blocks; block numbers are in
	// [0, Distinct).
	Distinct int
	// Refs is the number of block references, Σ len(Blocks); Tokens the
	// sum of input_length.
	Refs   int64
	Tokens int64
}

// HitTokens returns the prompt tokens that h leading blocks of request r
// cover: h full blocks, except that when every block hits the last one may
// be partial, so the answer is then the whole input_length.
func (t *Trace) HitTokens(r *Request, h int) int64 {
	if h >= len(r.Blocks) {
		return r.Input
	}
	return int64(h) * t.BlockTokens
}

// BaseName returns a trace file's name without its directories and its
// .gz, .jsonl or .json extensions: the name of its reports.
func BaseName(path string) string {
	name := filepath.Base(path)
	for _, ext := range []string{".gz", ".jsonl", ".json"} {
		name = strings.TrimSuffix(name, ext)
	}
	return name
}

// line is the JSON shape of one request. Pointers tell a missing field from
// a zero one; unknown fields (session ids, delays) are ignored.
type line struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int64   `json:"input_length"`
	OutputLength *int64   `json:"output_length"`
	HashIDs      *[]int64 `json:"hash_ids"`
}

// ReadFile parses the trace file at path, gzipped or not (told by the
// gzip magic bytes, not the name). blockTokens is the tokens per block;
// 0 means DefaultBlockTokens.
func ReadFile(path string, blockTokens int64) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	return Parse(path, f, blockTokens)
}

// Parse reads a trace in the Mooncake JSONL format from r: one JSON object
// per line with timestamp (ms, ≥ 0), input_length (tokens, > 0),
// output_length (tokens, ≥ 0) and hash_ids (a non-empty list of integer
// block ids). Blank lines are skipped. Each request must have exactly the
// blocks its input needs, ⌈input_length ÷ blockTokens⌉, the last one
// possibly partial. Input compressed with gzip is decompressed. name names
// the input in errors, which wrap ErrFormat and give the line number.
func Parse(name string, r io.Reader, blockTokens int64) (*Trace, error) {
	if blockTokens == 0 {
		blockTokens = DefaultBlockTokens
	}
	if blockTokens < 0 {
		return nil, fmt.Errorf("%w: %s: block tokens %d must be positive", ErrFormat, name, blockTokens)
	}
	br := bufio.NewReaderSize(r, 1<<16)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 1<<16), maxLine)
	t := &Trace{Name: name, BlockTokens: blockTokens}
	dense := make(map[int64]int32)
	var flat []int32
	type span struct{ lo, hi int }
	var spans []span
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s:%d: %s", ErrFormat, name, n, fmt.Sprintf(format, args...))
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, bad("%v", err)
		}
		switch {
		case l.Timestamp == nil:
			return nil, bad("missing timestamp")
		case l.InputLength == nil:
			return nil, bad("missing input_length")
		case l.OutputLength == nil:
			return nil, bad("missing output_length")
		case l.HashIDs == nil:
			return nil, bad("missing hash_ids")
		}
		ts := *l.Timestamp
		if !(ts >= 0) || ts > maxMillis {
			return nil, bad("timestamp %v outside [0, %d] ms", ts, int64(maxMillis))
		}
		in, out, ids := *l.InputLength, *l.OutputLength, *l.HashIDs
		if in <= 0 {
			return nil, bad("input_length %d must be positive", in)
		}
		if out < 0 {
			return nil, bad("output_length %d must not be negative", out)
		}
		if need := (in + blockTokens - 1) / blockTokens; int64(len(ids)) != need {
			return nil, bad("hash_ids has %d blocks but input_length %d needs %d blocks of %d tokens", len(ids), in, need, blockTokens)
		}
		if len(dense)+len(ids) > math.MaxInt32 {
			return nil, bad("more than %d distinct blocks", math.MaxInt32)
		}
		lo := len(flat)
		for _, id := range ids {
			b, ok := dense[id]
			if !ok {
				b = int32(len(dense))
				dense[id] = b
			}
			flat = append(flat, b)
		}
		spans = append(spans, span{lo, len(flat)})
		t.Requests = append(t.Requests, Request{Arrival: int64(ts * 1e6), Input: in, Output: out, Line: n})
		t.Tokens += in
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: %s:%d: line longer than %d bytes", ErrFormat, name, n+1, maxLine)
		}
		return nil, fmt.Errorf("%w: %s: after line %d: %v", ErrFormat, name, n, err)
	}
	if len(t.Requests) == 0 {
		return nil, fmt.Errorf("%w: %s: no requests", ErrFormat, name)
	}
	flat = slices.Clip(flat)
	for i, s := range spans {
		t.Requests[i].Blocks = flat[s.lo:s.hi:s.hi]
	}
	slices.SortStableFunc(t.Requests, func(a, b Request) int {
		switch {
		case a.Arrival < b.Arrival:
			return -1
		case a.Arrival > b.Arrival:
			return 1
		}
		return 0
	})
	t.Distinct = len(dense)
	t.Refs = int64(len(flat))
	return t, nil
}
