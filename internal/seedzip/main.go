// Seedzip converts between Go's fuzz corpus and libFuzzer's inputs. It
// turns a directory of Go fuzz corpus files into a libFuzzer seed corpus
// zip, as ClusterFuzzLite and OSS-Fuzz take it (<Target>_seed_corpus.zip
// next to the fuzzer binary), and one libFuzzer input (a crash) back into
// a Go corpus file that go test replays.
//
// Usage:
//
//	seedzip [-layout consumer|v2|raw] -o OUT.zip DIR
//	seedzip [-layout consumer|v2|raw] -go DIR INPUT
//
// Go writes its corpus (testdata/fuzz/<Target>/*) in the "go test fuzz v1"
// format: a header line, then one Go literal per argument of the fuzz
// function, such as []byte("\x00\x01") or int(5). A libFuzzer binary reads
// raw bytes instead, so every file is decoded and re-encoded in the layout
// the binary's harness decodes:
//
//   - consumer (default): the layout of go-118-fuzz-build's harness as the
//     Go module proxy serves it (the version .clusterfuzzlite/build.sh
//     pins), which reads each argument with go-fuzz-headers'
//     ConsumeFuzzer: a []byte or string is a 4-byte big-endian length,
//     then that many bytes (a length of 0 means 30, one other than the
//     bytes left is taken modulo them); fixed-size arguments are read in
//     order (ints by their size, int and uint as 8 bytes and a byte-order
//     flag). Only inputs of one []byte or string argument are supported,
//     and an empty one cannot be expressed: with nothing after the length
//     the harness never calls the target, so it is encoded as the bare
//     length.
//   - v2: the layout of OSS-Fuzz's go-118-fuzz-build_v2 image builder
//     (input.Source.FillAndCall), as its documentation describes it; not
//     used by build.sh and not checked against that builder here: the
//     fixed-size arguments first, in order, big-endian (ints and uints by
//     their size, int and uint as 8 bytes, bool as 1, floats as their
//     IEEE bits); then one weight byte per []byte or string argument; then
//     those arguments' bytes, the last taking all that is left. Only one
//     []byte or string argument is supported.
//   - raw: the concatenated bytes of a single []byte or string argument,
//     for harnesses that pass libFuzzer's input through unchanged.
//
// With -go, INPUT is one libFuzzer input of a target that takes one
// []byte; seedzip decodes it in the layout and writes the payload to DIR
// as a Go corpus file named, as go test names a crasher, by the first 16
// hex digits of its SHA-256, then prints the file's path. go test
// replays it from then on (go test -run '^FuzzX/^NAME$' ./pkg/).
//
// Entries keep their corpus file names and a fixed modification time, so
// the same corpus always gives the same zip. Seedzip exits 1 when a file
// cannot be decoded or encoded (naming it), when DIR holds no corpus
// file, or when INPUT is one on which the harness never calls the target,
// and 2 on a usage error.
package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seedzip", flag.ContinueOnError)
	fs.SetOutput(stderr)
	layout := fs.String("layout", "consumer", "input layout of the harness: consumer, v2 or raw")
	out := fs.String("o", "", "the zip to write")
	goDir := fs.String("go", "", "write the libFuzzer input INPUT to this directory as a Go corpus file")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seedzip [-layout consumer|v2|raw] -o OUT.zip DIR\n"+
			"       seedzip [-layout consumer|v2|raw] -go DIR INPUT\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 || (*out == "") == (*goDir == "") || !slices.Contains(layouts, *layout) {
		fs.Usage()
		return 2
	}
	if *goDir != "" {
		path, err := writeGoFile(*goDir, fs.Arg(0), *layout)
		if err != nil {
			fmt.Fprintf(stderr, "seedzip: %v\n", err)
			return 1
		}
		fmt.Fprintln(stdout, path)
		return 0
	}
	n, err := writeZip(*out, fs.Arg(0), *layout)
	if err != nil {
		fmt.Fprintf(stderr, "seedzip: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "seedzip: %d seeds from %s in %s\n", n, fs.Arg(0), *out)
	return 0
}

// layouts are the harness layouts Encode and DecodeInput know.
var layouts = []string{"consumer", "v2", "raw"}

// writeZip encodes every corpus file of dir into the zip at path.
func writeZip(path, dir, layout string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return 0, fmt.Errorf("%s: no corpus files", dir)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		vals, err := Decode(data)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		raw, err := Encode(vals, layout)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return 0, err
		}
		if _, err := w.Write(raw); err != nil {
			return 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return len(names), os.WriteFile(path, buf.Bytes(), 0o644)
}

// header is the first line of a corpus file in Go's format.
const header = "go test fuzz v1"

// Decode parses a corpus file in the "go test fuzz v1" format into its
// values: []byte, string, bool, the sized ints and uints, float32 and
// float64 (rune and byte decode as int32 and uint8).
func Decode(data []byte) ([]any, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != header {
		return nil, fmt.Errorf("not a Go fuzz corpus file: first line is not %q", header)
	}
	var vals []any
	for i, line := range lines[1:] {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		v, err := decodeLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+2, err)
		}
		vals = append(vals, v)
	}
	return vals, nil
}

func decodeLine(line string) (any, error) {
	expr, err := parser.ParseExpr(line)
	if err != nil {
		return nil, err
	}
	call, ok := expr.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil, fmt.Errorf("%q is not T(literal)", line)
	}
	typ := ""
	switch f := call.Fun.(type) {
	case *ast.Ident:
		typ = f.Name
	case *ast.ArrayType:
		if elt, ok := f.Elt.(*ast.Ident); ok && f.Len == nil && (elt.Name == "byte" || elt.Name == "uint8") {
			typ = "[]byte"
		}
	}
	arg := call.Args[0]
	switch typ {
	case "[]byte", "string":
		lit, ok := arg.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return nil, fmt.Errorf("%q: want a string literal", line)
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", line, err)
		}
		if typ == "string" {
			return s, nil
		}
		return []byte(s), nil
	case "bool":
		id, ok := arg.(*ast.Ident)
		if !ok || (id.Name != "true" && id.Name != "false") {
			return nil, fmt.Errorf("%q: want true or false", line)
		}
		return id.Name == "true", nil
	case "float32", "float64":
		return decodeFloat(typ, arg, line)
	case "int", "int8", "int16", "int32", "rune", "int64":
		s, err := literal(arg)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", line, err)
		}
		bits := map[string]int{"int": 64, "int8": 8, "int16": 16, "int32": 32, "rune": 32, "int64": 64}[typ]
		v, err := parseInt(s, bits)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", line, err)
		}
		switch typ {
		case "int":
			return int(v), nil
		case "int8":
			return int8(v), nil
		case "int16":
			return int16(v), nil
		case "int32", "rune":
			return int32(v), nil
		}
		return v, nil
	case "uint", "uint8", "byte", "uint16", "uint32", "uint64":
		s, err := literal(arg)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", line, err)
		}
		bits := map[string]int{"uint": 64, "uint8": 8, "byte": 8, "uint16": 16, "uint32": 32, "uint64": 64}[typ]
		v, err := parseUint(s, bits)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", line, err)
		}
		switch typ {
		case "uint":
			return uint(v), nil
		case "uint8", "byte":
			return uint8(v), nil
		case "uint16":
			return uint16(v), nil
		case "uint32":
			return uint32(v), nil
		}
		return v, nil
	}
	return nil, fmt.Errorf("%q: unsupported type", line)
}

// literal returns the text of a number or character literal, with its
// sign.
func literal(e ast.Expr) (string, error) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.CHAR {
			r, _, _, err := strconv.UnquoteChar(e.Value[1:len(e.Value)-1], '\'')
			if err != nil {
				return "", err
			}
			return strconv.Itoa(int(r)), nil
		}
		return e.Value, nil
	case *ast.UnaryExpr:
		if e.Op == token.SUB {
			s, err := literal(e.X)
			return "-" + s, err
		}
	case *ast.ParenExpr:
		return literal(e.X)
	}
	return "", fmt.Errorf("not a literal")
}

func parseInt(s string, bits int) (int64, error) { return strconv.ParseInt(s, 0, bits) }

func parseUint(s string, bits int) (uint64, error) { return strconv.ParseUint(s, 0, bits) }

// decodeFloat reads a float literal or math.Float64frombits(N) /
// math.Float32frombits(N), which Go writes for NaNs and infinities.
func decodeFloat(typ string, arg ast.Expr, line string) (any, error) {
	if c, ok := arg.(*ast.CallExpr); ok && len(c.Args) == 1 {
		if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
			s, err := literal(c.Args[0])
			if err != nil {
				return nil, fmt.Errorf("%q: %v", line, err)
			}
			switch sel.Sel.Name {
			case "Float64frombits":
				u, err := strconv.ParseUint(s, 0, 64)
				if err != nil {
					return nil, fmt.Errorf("%q: %v", line, err)
				}
				if typ == "float32" {
					return float32(math.Float64frombits(u)), nil
				}
				return math.Float64frombits(u), nil
			case "Float32frombits":
				u, err := strconv.ParseUint(s, 0, 32)
				if err != nil {
					return nil, fmt.Errorf("%q: %v", line, err)
				}
				if typ == "float64" {
					return float64(math.Float32frombits(uint32(u))), nil
				}
				return math.Float32frombits(uint32(u)), nil
			}
		}
	}
	s, err := literal(arg)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", line, err)
	}
	bits := 64
	if typ == "float32" {
		bits = 32
	}
	f, err := strconv.ParseFloat(s, bits)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", line, err)
	}
	if typ == "float32" {
		return float32(f), nil
	}
	return f, nil
}

// Encode lays vals out as libFuzzer input for the harness layout (see the
// package doc).
func Encode(vals []any, layout string) ([]byte, error) {
	var fixed, dynamic []byte
	nDynamic := 0
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			nDynamic++
			dynamic = v
		case string:
			nDynamic++
			dynamic = []byte(v)
		case bool:
			b := byte(0)
			if v {
				b = 1
			}
			fixed = append(fixed, b)
		case int:
			fixed = binary.BigEndian.AppendUint64(fixed, uint64(v))
		case int8:
			fixed = append(fixed, byte(v))
		case int16:
			fixed = binary.BigEndian.AppendUint16(fixed, uint16(v))
		case int32:
			fixed = binary.BigEndian.AppendUint32(fixed, uint32(v))
		case int64:
			fixed = binary.BigEndian.AppendUint64(fixed, uint64(v))
		case uint:
			fixed = binary.BigEndian.AppendUint64(fixed, uint64(v))
		case uint8:
			fixed = append(fixed, v)
		case uint16:
			fixed = binary.BigEndian.AppendUint16(fixed, v)
		case uint32:
			fixed = binary.BigEndian.AppendUint32(fixed, v)
		case uint64:
			fixed = binary.BigEndian.AppendUint64(fixed, v)
		case float32:
			fixed = binary.BigEndian.AppendUint32(fixed, math.Float32bits(v))
		case float64:
			fixed = binary.BigEndian.AppendUint64(fixed, math.Float64bits(v))
		default:
			return nil, fmt.Errorf("unsupported value %T", v)
		}
	}
	if nDynamic > 1 {
		return nil, fmt.Errorf("%d []byte or string arguments; only one can be laid out exactly", nDynamic)
	}
	switch layout {
	case "consumer":
		if len(fixed) > 0 || nDynamic != 1 {
			return nil, fmt.Errorf("layout consumer takes exactly one []byte or string argument")
		}
		if uint64(len(dynamic)) > math.MaxUint32 {
			return nil, fmt.Errorf("payload of %d bytes does not fit a 4-byte length", len(dynamic))
		}
		out := binary.BigEndian.AppendUint32(nil, uint32(len(dynamic)))
		return append(out, dynamic...), nil
	case "raw":
		if len(fixed) > 0 || nDynamic != 1 {
			return nil, fmt.Errorf("layout raw takes exactly one []byte or string argument")
		}
		return slices.Clone(dynamic), nil
	case "v2":
		out := fixed
		if nDynamic == 1 {
			out = append(out, 0) // the weight byte; one dynamic argument takes the rest
			out = append(out, dynamic...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown layout %q", layout)
}

// errNotRun is DecodeInput's answer for an input the harness never passes
// to the target.
var errNotRun = errors.New("the harness never calls the target on this input")

// DecodeInput returns the one []byte argument the harness of layout hands
// the target for the libFuzzer input in, the inverse of Encode for such
// targets. Under consumer it follows go-fuzz-headers' GetBytes exactly,
// so any input libFuzzer made, not only Encode's, decodes to what the
// target saw.
func DecodeInput(in []byte, layout string) ([]byte, error) {
	switch layout {
	case "consumer":
		if len(in) < 4 {
			return nil, fmt.Errorf("%w: %d bytes, fewer than the 4-byte length", errNotRun, len(in))
		}
		n := binary.BigEndian.Uint32(in)
		left := uint32(len(in) - 4)
		if left == 0 {
			return nil, fmt.Errorf("%w: nothing after the length", errNotRun)
		}
		if n == 0 {
			n = 30
		}
		if n != left {
			n %= left
		}
		return slices.Clone(in[4 : 4+n]), nil
	case "v2":
		if len(in) == 0 {
			return nil, fmt.Errorf("%w: no weight byte", errNotRun)
		}
		return slices.Clone(in[1:]), nil
	case "raw":
		return slices.Clone(in), nil
	}
	return nil, fmt.Errorf("unknown layout %q", layout)
}

// GoFile renders one []byte argument as a corpus file in Go's format.
func GoFile(payload []byte) []byte {
	return fmt.Appendf(nil, "%s\n[]byte(%q)\n", header, payload)
}

// writeGoFile decodes the libFuzzer input at input and writes it to dir
// as a Go corpus file named as go test names a crasher; it returns the
// file's path.
func writeGoFile(dir, input, layout string) (string, error) {
	in, err := os.ReadFile(input)
	if err != nil {
		return "", err
	}
	payload, err := DecodeInput(in, layout)
	if err != nil {
		return "", fmt.Errorf("%s: %w", input, err)
	}
	file := GoFile(payload)
	sum := sha256.Sum256(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, hex.EncodeToString(sum[:])[:16])
	return path, os.WriteFile(path, file, 0o644)
}
