package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"

	"github.com/kvalloc/kvalloc/l2"
)

// respBound is the longest bulk FuzzRESPReply's reader accepts: small, so
// that inputs reach past it.
const respBound = 64

// FuzzRESPReply feeds any bytes to the piece path's reply reader
// (l2.RESPReader) as a connection's replies and reads them as the piece
// path does, each bulk in chunks of a few sizes, some discarded
// (SkipBulk). It checks that the reader never panics and agrees, reply by
// reply, with a plain model of the grammar it reads (respModel): the same
// kinds, lengths, lines and bulk bytes, and the same end: io.EOF between
// replies, io.ErrUnexpectedEOF in one, l2.ErrProtocol for anything else,
// a bulk over the bound refused before its bytes. The seeds are every
// reply it reads and each broken one way.
func FuzzRESPReply(f *testing.F) {
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := checkRESP(data, l2.NewRESPReader); err != nil {
			t.Fatal(err)
		}
	})
}

// respItem is one reply as read: its start and a bulk's bytes (nil when
// discarded).
type respItem struct {
	r    l2.Reply
	data []byte
}

// respEnd names how a read of replies ended.
func respEnd(err error) string {
	switch {
	case errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	case errors.Is(err, l2.ErrProtocol):
		return "protocol"
	}
	return fmt.Sprintf("other error %v", err)
}

// skipped reports whether the j-th reply, a bulk, is discarded after its
// first bytes rather than read whole; chunk is the size of the pieces the
// others are read in.
func skipped(j int) bool { return j%3 == 2 }
func chunk(j int) int    { return 1 + (j%5)*7 }

// readRESP reads data's replies with a reader newReader makes, as the
// piece path does.
func readRESP(data []byte, newReader func(io.Reader, int64) *l2.RESPReader) ([]respItem, string) {
	rd := newReader(bytes.NewReader(data), respBound)
	var out []respItem
	for j := 0; ; j++ {
		r, err := rd.Next()
		if err != nil {
			return out, respEnd(err)
		}
		it := respItem{r: r}
		if r.Kind == '$' && r.Len >= 0 {
			if skipped(j) {
				head := make([]byte, min(r.Len, 3))
				if err := rd.ReadBulk(head); err != nil {
					return out, respEnd(err)
				}
				if err := rd.SkipBulk(); err != nil {
					return out, respEnd(err)
				}
			} else {
				it.data = make([]byte, r.Len)
				for off := 0; off < len(it.data); off += chunk(j) {
					if err := rd.ReadBulk(it.data[off:min(off+chunk(j), len(it.data))]); err != nil {
						return out, respEnd(err)
					}
				}
				if err := rd.EndBulk(); err != nil {
					return out, respEnd(err)
				}
			}
		}
		out = append(out, it)
	}
}

// respModel is the grammar, read plainly from the whole input: a reply
// is a type byte ('$', '+' or '-') and a line of at most l2.MaxRESPLine
// bytes, no CR in it, ended by CRLF; a '$' line is -1 or a decimal
// length without sign or leading zero, of at most 18 digits and at most
// bound; a bulk's bytes follow, then CRLF.
func respModel(data []byte, bound int64) ([]respItem, string) {
	var out []respItem
	for j := 0; ; j++ {
		if len(data) == 0 {
			return out, "eof"
		}
		kind := data[0]
		data = data[1:]
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			if len(data) > l2.MaxRESPLine+2 {
				return out, "protocol"
			}
			return out, "truncated"
		}
		if nl+1 > l2.MaxRESPLine+2 || nl == 0 || data[nl-1] != '\r' || bytes.IndexByte(data[:nl-1], '\r') >= 0 {
			return out, "protocol"
		}
		line := data[:nl-1]
		data = data[nl+1:]
		switch kind {
		case '+', '-':
			out = append(out, respItem{r: l2.Reply{Kind: kind, Line: string(line)}})
			continue
		case '$':
		default:
			return out, "protocol"
		}
		if string(line) == "-1" {
			out = append(out, respItem{r: l2.Reply{Kind: '$', Len: -1}})
			continue
		}
		n, err := strconv.ParseUint(string(line), 10, 64)
		if err != nil || len(line) > 18 || line[0] == '+' || (line[0] == '0' && len(line) > 1) || int64(n) > bound {
			return out, "protocol"
		}
		if uint64(len(data)) < n+2 {
			return out, "truncated"
		}
		if data[n] != '\r' || data[n+1] != '\n' {
			return out, "protocol"
		}
		it := respItem{r: l2.Reply{Kind: '$', Len: int64(n)}}
		if !skipped(j) {
			it.data = bytes.Clone(data[:n])
			if it.data == nil {
				it.data = []byte{}
			}
		}
		out = append(out, it)
		data = data[n+2:]
	}
}

// checkRESP is FuzzRESPReply's body, against readers newReader makes
// (l2.NewRESPReader, or a broken one: internal/reference/mutant).
func checkRESP(data []byte, newReader func(io.Reader, int64) *l2.RESPReader) error {
	got, gotEnd := readRESP(data, newReader)
	want, wantEnd := respModel(data, respBound)
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.r != w.r || !bytes.Equal(g.data, w.data) || (g.data == nil) != (w.data == nil) {
			return fmt.Errorf("reply %d read as %+v %q, the grammar says %+v %q", i, g.r, g.data, w.r, w.data)
		}
	}
	if len(got) != len(want) || gotEnd != wantEnd {
		return fmt.Errorf("the reader read %d replies and ended %s; the grammar says %d and %s", len(got), gotEnd, len(want), wantEnd)
	}
	return nil
}

func respSeeds() []seed {
	bulk := func(p string) string { return "$" + strconv.Itoa(len(p)) + "\r\n" + p + "\r\n" }
	piece := string(bytes.Repeat([]byte("kv\r\n"), 10))
	return []seed{
		{"get-hit", []byte(bulk(piece))},
		{"get-miss", []byte("$-1\r\n")},
		{"set-ok", []byte("+OK\r\n")},
		{"moved", []byte("-MOVED 3999 127.0.0.1:6381\r\n")},
		{"pipeline", []byte(bulk(piece) + "$-1\r\n" + bulk("") + bulk("abc") + "-OOM command not allowed\r\n" + "+OK\r\n" + bulk("xy"))},
		{"empty-bulk", []byte(bulk(""))},
		{"over-bound", []byte("$65\r\n" + string(bytes.Repeat([]byte{'x'}, 65)) + "\r\n")},
		{"at-bound", []byte(bulk(string(bytes.Repeat([]byte{'y'}, 64))))},
		{"bad-trailer", []byte("$3\r\nabcXY")},
		{"short-bulk", []byte("$10\r\nabc")},
		{"no-crlf-line", []byte("+OK\n")},
		{"leading-zero", []byte("$03\r\nabc\r\n")},
		{"negative", []byte("$-2\r\n")},
		{"integer", []byte(":1\r\n")},
		{"long-line", []byte("-" + string(bytes.Repeat([]byte{'e'}, l2.MaxRESPLine+1)) + "\r\n")},
		{"cr-in-line", []byte("-ERR a\rb\r\n")},
	}
}

func init() { seedSets["FuzzRESPReply"] = respSeeds() }
