// Seedzip turns a directory of Go fuzz corpus files into a libFuzzer seed
// corpus zip, as ClusterFuzzLite and OSS-Fuzz take it
// (<Target>_seed_corpus.zip next to the fuzzer binary).
//
// Usage:
//
//	seedzip [-layout v2|raw] -o OUT.zip DIR
//
// Go writes its corpus (testdata/fuzz/<Target>/*) in the "go test fuzz v1"
// format: a header line, then one Go literal per argument of the fuzz
// function, such as []byte("\x00\x01") or int(5). A libFuzzer binary reads
// raw bytes instead, so every file is decoded and re-encoded in the layout
// the binary's harness decodes:
//
//   - v2 (default): the layout of compile_native_go_fuzzer_v2's harness
//     (go-118-fuzz-build v2, input.Source.FillAndCall): the fixed-size
//     arguments first, in order, big-endian (ints and uints by their size,
//     int and uint as 8 bytes, bool as 1, floats as their IEEE bits); then
//     one weight byte per []byte or string argument; then those
//     arguments' bytes, the last taking all that is left. Only one
//     []byte or string argument is supported: the split between several
//     depends on the weights and cannot always be reproduced exactly.
//     kvalloc's fuzz targets each take one []byte, so a seed is one zero
//     weight byte and the payload.
//   - raw: the concatenated bytes of a single []byte or string argument,
//     for harnesses that pass libFuzzer's input through unchanged.
//
// Entries keep their corpus file names and a fixed modification time, so
// the same corpus always gives the same zip. Seedzip exits 1 when a file
// cannot be decoded or encoded (naming it), or when DIR holds no corpus
// file, and 2 on a usage error.
package main

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
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
	layout := fs.String("layout", "v2", "input layout of the harness: v2 or raw")
	out := fs.String("o", "", "the zip to write")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seedzip [-layout v2|raw] -o OUT.zip DIR\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 || *out == "" || (*layout != "v2" && *layout != "raw") {
		fs.Usage()
		return 2
	}
	n, err := writeZip(*out, fs.Arg(0), *layout)
	if err != nil {
		fmt.Fprintf(stderr, "seedzip: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "seedzip: %d seeds from %s in %s\n", n, fs.Arg(0), *out)
	return 0
}

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
