package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A trace shape (a .shape file, testdata/scenarios/SHAPES.md) describes
// serving traffic as conversations whose prompts begin with segments
// shared across conversations: system prompts, tool definitions,
// documents. Generate turns it into a trace in the Mooncake JSONL format,
// deterministically from its seed, so that every replay of the Mooncake
// trace (bench/trace, bench/node, bench/cluster) takes it too. The file
// has the lexical rules and value syntax of a scenario file (FORMAT.md):
// comments, fields, RATE, DURATION, FRACTION and INT are parsed by the
// same code.

// ErrShape wraps every rejection of a trace shape file.
var ErrShape = errors.New("scenario: malformed trace shape")

// Range is an inclusive range of integers, drawn uniformly.
type Range struct{ Lo, Hi int }

// Segment is one shared part of a prompt. A conversation includes one item
// of the segment with probability Share, the item drawn with Zipf
// popularity (P(item k) ∝ (1 + k)^−Zipf) among Count items, each item
// Blocks whole blocks long (its length drawn once per item). The segments
// follow each other in the order of the file, and hash ids are chained as
// Mooncake's are: an item's blocks are shared by two conversations only
// when everything before it in their prompts is the same too.
type Segment struct {
	Name   string
	Count  int
	Blocks Range
	Share  float64
	Zipf   float64
}

// Shape is one parsed trace shape file.
type Shape struct {
	Name    string   // shape NAME, or the file name without extension
	File    string   // the path it was read from, "" for ParseShape
	Outcome []string // outcome lines: what the shape is for
	Seed    uint64   // seed N: the root of the generator's stream
	// BlockTokens is the tokens per hash id (block-tokens, 512).
	BlockTokens int
	// Span is how long conversations keep opening (span DURATION).
	Span time.Duration
	// Rate is conversations opened per second, a Poisson process; Turns
	// the requests per conversation; Think the mean of the exponential
	// gap between a turn and the next, ThinkMin added to every gap.
	Rate            float64
	Turns           Range
	Think, ThinkMin time.Duration
	// Segments are the shared prompt parts, in prompt order.
	Segments []Segment
	// First and Next are the user tokens the first turn and each later
	// turn add; Output the tokens of each answer (output_length), which
	// the next turn's prompt includes.
	First, Next, Output Range
}

// Defaults of a shape file.
const (
	DefaultShapeBlockTokens = 512
)

// ParseShapeFile reads and parses a trace shape file. Its name defaults to
// the file name without its extension.
func ParseShapeFile(path string) (*Shape, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrShape, err)
	}
	base := filepath.Base(path)
	s, err := ParseShape(strings.TrimSuffix(base, filepath.Ext(base)), data)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	s.File = path
	return s, nil
}

// shapeOnce are the directives a shape file may give at most once.
var shapeOnce = map[string]bool{"shape": true, "seed": true, "block-tokens": true, "span": true, "conversations": true, "user": true, "output": true}

// shapeRequired must each appear.
var shapeRequired = []string{"span", "conversations", "user", "output"}

// ParseShape parses a trace shape from its text; name is the default
// name. Errors wrap ErrShape and start with the 1-based line ("12: ...").
func ParseShape(name string, data []byte) (*Shape, error) {
	s := &Shape{Name: name, BlockTokens: DefaultShapeBlockTokens}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: 0: file is not valid UTF-8", ErrShape)
	}
	seen := map[string]int{}
	lines := bytes.Split(data, []byte{'\n'})
	for i, raw := range lines {
		p := &parser{line: i + 1}
		fields, rest, err := splitLine(raw)
		if err == nil && len(fields) > 0 {
			kw := fields[0]
			if l, dup := seen[kw]; dup && shapeOnce[kw] {
				err = p.errorf("%q repeated (first on line %d)", kw, l)
			} else {
				seen[kw] = p.line
				err = s.directive(p, kw, fields[1:], rest)
			}
		} else if err != nil {
			err = p.errorf("%v", err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrShape, err)
		}
	}
	for _, kw := range shapeRequired {
		if _, ok := seen[kw]; !ok {
			return nil, fmt.Errorf("%w: %d: missing %q", ErrShape, len(lines), kw)
		}
	}
	return s, nil
}

// directive parses one statement of a shape file into s.
func (s *Shape) directive(p *parser, kw string, a []string, rest string) error {
	one := func() error {
		if len(a) != 1 {
			return p.errorf("want: %s VALUE", kw)
		}
		return nil
	}
	switch kw {
	case "shape":
		if err := one(); err != nil {
			return err
		}
		if !validName(a[0]) {
			return p.errorf("shape name %q: letters, digits, - and _ only", a[0])
		}
		s.Name = a[0]
	case "outcome":
		if rest == "" {
			return p.errorf("outcome needs text")
		}
		s.Outcome = append(s.Outcome, rest)
	case "seed":
		if err := one(); err != nil {
			return err
		}
		n, err := strconv.ParseUint(a[0], 10, 64)
		if err != nil {
			return p.errorf("seed %q: not an unsigned 64-bit integer", a[0])
		}
		s.Seed = n
	case "block-tokens":
		if err := one(); err != nil {
			return err
		}
		n, err := parseInt(a[0], 1, 1<<20)
		if err != nil {
			return p.errorf("block-tokens: %v", err)
		}
		s.BlockTokens = n
	case "span":
		if err := one(); err != nil {
			return err
		}
		d, err := parsePositiveDuration(a[0])
		if err != nil {
			return p.errorf("span: %v", err)
		}
		s.Span = d
	case "conversations":
		kv, err := p.keyValues(a, "rate", "turns", "think", "think-min")
		if err != nil {
			return err
		}
		for _, k := range []string{"rate", "turns", "think"} {
			if kv[k] == "" {
				return p.errorf("conversations: missing %s=", k)
			}
		}
		if s.Rate, err = parseRate(kv["rate"]); err != nil || !(s.Rate > 0) {
			return p.errorf("conversations rate=%s: want a positive RATE", kv["rate"])
		}
		if s.Turns, err = parseRange(kv["turns"], 1, 1<<16); err != nil {
			return p.errorf("conversations turns=: %v", err)
		}
		if s.Think, err = parseDuration(kv["think"]); err != nil {
			return p.errorf("conversations think=: %v", err)
		}
		if v := kv["think-min"]; v != "" {
			if s.ThinkMin, err = parseDuration(v); err != nil {
				return p.errorf("conversations think-min=: %v", err)
			}
		}
	case "segment":
		if len(a) < 1 || strings.Contains(a[0], "=") {
			return p.errorf("want: segment NAME count=INT blocks=LO..HI share=FRACTION zipf=S")
		}
		seg := Segment{Name: a[0], Share: 1, Zipf: 1.1}
		if !validName(seg.Name) {
			return p.errorf("segment name %q: letters, digits, - and _ only", seg.Name)
		}
		for _, o := range s.Segments {
			if o.Name == seg.Name {
				return p.errorf("segment %q declared twice", seg.Name)
			}
		}
		kv, err := p.keyValues(a[1:], "count", "blocks", "share", "zipf")
		if err != nil {
			return err
		}
		if kv["count"] == "" || kv["blocks"] == "" {
			return p.errorf("segment %s: count= and blocks= are required", seg.Name)
		}
		if seg.Count, err = parseInt(kv["count"], 1, 1<<24); err != nil {
			return p.errorf("segment %s count=: %v", seg.Name, err)
		}
		if seg.Blocks, err = parseRange(kv["blocks"], 1, 1<<16); err != nil {
			return p.errorf("segment %s blocks=: %v", seg.Name, err)
		}
		if v := kv["share"]; v != "" {
			if seg.Share, err = parseFraction(v); err != nil {
				return p.errorf("segment %s share=: %v", seg.Name, err)
			}
		}
		if v := kv["zipf"]; v != "" {
			z, err := strconv.ParseFloat(v, 64)
			if err != nil || !(z > 1) || math.IsInf(z, 0) {
				return p.errorf("segment %s zipf=%s: want a number > 1", seg.Name, v)
			}
			seg.Zipf = z
		}
		s.Segments = append(s.Segments, seg)
	case "user":
		kv, err := p.keyValues(a, "first", "next")
		if err != nil {
			return err
		}
		if kv["first"] == "" || kv["next"] == "" {
			return p.errorf("user: first= and next= are required")
		}
		if s.First, err = parseRange(kv["first"], 1, 1<<24); err != nil {
			return p.errorf("user first=: %v", err)
		}
		if s.Next, err = parseRange(kv["next"], 1, 1<<24); err != nil {
			return p.errorf("user next=: %v", err)
		}
	case "output":
		if err := one(); err != nil {
			return err
		}
		r, err := parseRange(a[0], 0, 1<<24)
		if err != nil {
			return p.errorf("output: %v", err)
		}
		s.Output = r
	default:
		return p.errorf("unknown keyword %q", kw)
	}
	return nil
}

// parseRange parses "LO..HI" or "N" (LO = HI = N), each in [lo, hi], LO ≤ HI.
func parseRange(s string, lo, hi int) (Range, error) {
	a, b, ranged := strings.Cut(s, "..")
	if !ranged {
		b = a
	}
	x, err := parseInt(a, lo, hi)
	if err != nil {
		return Range{}, err
	}
	y, err := parseInt(b, lo, hi)
	if err != nil {
		return Range{}, err
	}
	if x > y {
		return Range{}, fmt.Errorf("range %q: low end above high end", s)
	}
	return Range{x, y}, nil
}
