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
	"unicode/utf8"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/l1"
)

// ParseFile reads and parses one scenario file. The scenario's name
// defaults to the file name without its extension.
func ParseFile(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(path)
	sc, err := Parse(strings.TrimSuffix(base, filepath.Ext(base)), data)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	sc.File = path
	return sc, nil
}

// Parse parses a scenario from its text; name is the default name. Errors
// start with the 1-based line number ("12: ...").
func Parse(name string, data []byte) (*Scenario, error) {
	p := &parser{sc: &Scenario{
		Name:     name,
		Align:    DefaultAlign,
		Sweep:    sim.DefaultController,
		WriteTTL: DefaultWriteTTL,
		ReadTTL:  DefaultReadTTL,
	}}
	if !utf8.Valid(data) {
		return nil, errors.New("0: file is not valid UTF-8")
	}
	lines := bytes.Split(data, []byte{'\n'})
	for i, raw := range lines {
		p.line = i + 1
		fields, rest, err := splitLine(raw)
		if err != nil {
			return nil, p.errorf("%v", err)
		}
		if len(fields) == 0 {
			continue
		}
		if err := p.statement(fields, rest); err != nil {
			return nil, err
		}
	}
	p.line = len(lines)
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.sc, nil
}

// splitLine removes a trailing CR and the comment, checks the bytes, and
// splits the rest into fields separated by runs of spaces and tabs. rest
// is the text after the first field, trimmed, for outcome.
func splitLine(raw []byte) (fields []string, rest string, err error) {
	raw = bytes.TrimSuffix(raw, []byte{'\r'})
	if i := bytes.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	for _, b := range raw {
		if b < 0x20 && b != '\t' || b == 0x7f {
			return nil, "", fmt.Errorf("control byte 0x%02x outside a comment", b)
		}
	}
	s := string(raw)
	fields = strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(fields) > 0 {
		rest = strings.Trim(strings.TrimLeft(s, " \t")[len(fields[0]):], " \t")
	}
	return fields, rest, nil
}

type parser struct {
	sc       *Scenario
	line     int
	inOps    bool
	seen     map[string]int // header keyword -> line, for the ones allowed once
	poolSpec string
	poolLine int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("%d: "+format, append([]any{p.line}, args...)...)
}

var headerOnce = map[string]bool{"scenario": true, "seed": true, "align": true, "pool": true, "sweep": true, "ttl": true, "plot": true}

func (p *parser) statement(f []string, rest string) error {
	kw := f[0]
	switch kw {
	case "scenario", "outcome", "seed", "align", "pool", "layout", "sweep", "ttl", "stream", "plot":
		if p.inOps {
			return p.errorf("header directive %q after the first operation", kw)
		}
		if headerOnce[kw] {
			if p.seen == nil {
				p.seen = map[string]int{}
			}
			if l, ok := p.seen[kw]; ok {
				return p.errorf("%q repeated (first on line %d)", kw, l)
			}
			p.seen[kw] = p.line
		}
		return p.header(kw, f[1:], rest)
	}
	for k, name := range opNames {
		if name == kw {
			if !p.inOps {
				if err := p.endHeader(); err != nil {
					return err
				}
				p.inOps = true
			}
			op, err := p.op(OpKind(k), f[1:])
			if err != nil {
				return err
			}
			op.Kind, op.Line = OpKind(k), p.line
			p.sc.Ops = append(p.sc.Ops, op)
			return nil
		}
	}
	return p.errorf("unknown keyword %q", kw)
}

func (p *parser) header(kw string, a []string, rest string) error {
	sc := p.sc
	switch kw {
	case "scenario":
		if len(a) != 1 || !validName(a[0]) {
			return p.errorf("want: scenario NAME (letters, digits, '-', '_')")
		}
		sc.Name = a[0]
	case "outcome":
		if rest == "" {
			return p.errorf("want: outcome TEXT")
		}
		sc.Outcome = append(sc.Outcome, rest)
	case "seed":
		if len(a) != 1 {
			return p.errorf("want: seed N")
		}
		n, err := strconv.ParseUint(a[0], 10, 64)
		if err != nil {
			return p.errorf("seed %q is not an unsigned integer", a[0])
		}
		sc.Seed = n
	case "align":
		if len(a) != 1 {
			return p.errorf("want: align SIZE")
		}
		n, err := parseSize(a[0])
		if err != nil {
			return p.errorf("%v", err)
		}
		if n&(n-1) != 0 {
			return p.errorf("align %s is not a power of two", a[0])
		}
		sc.Align = n
	case "pool":
		if len(a) != 1 {
			return p.errorf("want: pool SIZE or pool N*LAYOUT")
		}
		p.poolSpec, p.poolLine = a[0], p.line
	case "layout":
		if len(a) != 2 || !validName(a[0]) {
			return p.errorf("want: layout NAME SIZE")
		}
		if p.layout(a[0]) >= 0 {
			return p.errorf("layout %q declared twice", a[0])
		}
		n, err := parseSize(a[1])
		if err != nil {
			return p.errorf("%v", err)
		}
		sc.Layouts = append(sc.Layouts, Layout{Name: a[0], Size: n})
	case "sweep":
		kv, err := p.keyValues(a, "every", "watermark", "ratio")
		if err != nil {
			return err
		}
		if v, ok := kv["every"]; ok {
			if sc.Sweep.Every, err = parsePositiveDuration(v); err != nil {
				return p.errorf("%v", err)
			}
		}
		if v, ok := kv["watermark"]; ok {
			if sc.Sweep.Watermark, err = parseFraction(v); err != nil {
				return p.errorf("%v", err)
			}
		}
		if v, ok := kv["ratio"]; ok {
			if sc.Sweep.Ratio, err = parseFraction(v); err != nil {
				return p.errorf("%v", err)
			}
		}
	case "ttl":
		kv, err := p.keyValues(a, "write", "read")
		if err != nil {
			return err
		}
		if v, ok := kv["write"]; ok {
			if sc.WriteTTL, err = parsePositiveDuration(v); err != nil {
				return p.errorf("%v", err)
			}
		}
		if v, ok := kv["read"]; ok {
			if sc.ReadTTL, err = parsePositiveDuration(v); err != nil {
				return p.errorf("%v", err)
			}
		}
	case "stream":
		return p.stream(a)
	case "plot":
		sp := &PlotSpec{Every: DefaultPlotEvery}
		for _, t := range a {
			if v, ok := strings.CutPrefix(t, "every="); ok {
				d, err := parsePositiveDuration(v)
				if err != nil {
					return p.errorf("%v", err)
				}
				sp.Every = d
				continue
			}
			if _, err := ParsePolicy(t); err != nil {
				return p.errorf("%v", err)
			}
			sp.Policies = append(sp.Policies, t)
		}
		if len(sp.Policies) == 0 {
			return p.errorf("want: plot [every=D] POLICY...")
		}
		sc.Plot = sp
	}
	return nil
}

// endHeader resolves the pool once every layout is known.
func (p *parser) endHeader() error {
	sc := p.sc
	if p.poolSpec == "" {
		return p.errorf("missing pool directive before the first operation")
	}
	if len(sc.Layouts) == 0 {
		return p.errorf("missing layout directive before the first operation")
	}
	line := p.line
	p.line = p.poolLine
	defer func() { p.line = line }()
	if n, l, ok := strings.Cut(p.poolSpec, "*"); ok {
		k, err := parseInt(n, 1, math.MaxInt32)
		if err != nil {
			return p.errorf("pool %s: %v", p.poolSpec, err)
		}
		li := p.layout(l)
		if li < 0 {
			return p.errorf("pool %s: unknown layout %q", p.poolSpec, l)
		}
		sc.Pool = int64(k) * sc.AlignedSize(li)
	} else {
		n, err := parseSize(p.poolSpec)
		if err != nil {
			return p.errorf("%v", err)
		}
		sc.Pool = n
	}
	if sc.Pool%sc.Align != 0 {
		return p.errorf("pool %s is not a multiple of align %d", p.poolSpec, sc.Align)
	}
	for i, l := range sc.Layouts {
		if sc.AlignedSize(i) > sc.Pool {
			return p.errorf("layout %s (%d bytes) is larger than the pool", l.Name, l.Size)
		}
	}
	return nil
}

func (p *parser) finish() error {
	if !p.inOps {
		if err := p.endHeader(); err != nil {
			return err
		}
	}
	if len(p.sc.Ops) == 0 {
		return p.errorf("no operations")
	}
	return nil
}

func (p *parser) stream(a []string) error {
	sc := p.sc
	if len(a) < 1 || !validName(a[0]) {
		return p.errorf("want: stream NAME key=value...")
	}
	for _, s := range sc.Streams {
		if s.Name == a[0] {
			return p.errorf("stream %q declared twice (line %d)", a[0], s.Line)
		}
	}
	kv, err := p.keyValues(a[1:], "layout", "rate", "chunks", "reads", "reuse", "window", "hold",
		"burst-every", "burst-len", "burst-x", "burst-at")
	if err != nil {
		return err
	}
	s := Stream{Name: a[0], Line: p.line, Window: DefaultWindow, Hold: DefaultHold}
	for _, req := range []string{"layout", "rate", "chunks"} {
		if _, ok := kv[req]; !ok {
			return p.errorf("stream %s: missing %s=", s.Name, req)
		}
	}
	if s.Layout = p.layout(kv["layout"]); s.Layout < 0 {
		return p.errorf("stream %s: unknown layout %q (declare layouts before streams)", s.Name, kv["layout"])
	}
	if s.Rate, err = parseRate(kv["rate"]); err != nil {
		return p.errorf("stream %s: %v", s.Name, err)
	}
	lo, hi, ranged := strings.Cut(kv["chunks"], "..")
	if !ranged {
		hi = lo
	}
	if s.MinChunks, err = parseInt(lo, 1, 1<<20); err == nil {
		s.MaxChunks, err = parseInt(hi, s.MinChunks, 1<<20)
	}
	if err != nil {
		return p.errorf("stream %s: chunks=%s: %v", s.Name, kv["chunks"], err)
	}
	if v, ok := kv["reads"]; ok {
		if s.Reads, err = parseFraction(v); err != nil {
			return p.errorf("stream %s: %v", s.Name, err)
		}
	}
	if v, ok := kv["reuse"]; ok {
		switch {
		case v == "uniform":
			s.Reuse = Reuse{Kind: ReuseUniform}
		case v == "recent":
			s.Reuse = Reuse{Kind: ReuseRecent}
		case strings.HasPrefix(v, "zipf:"):
			f, err := strconv.ParseFloat(strings.TrimPrefix(v, "zipf:"), 64)
			if err != nil || !(f > 1) || math.IsInf(f, 0) {
				return p.errorf("stream %s: reuse=%s: the Zipf exponent must be a number > 1", s.Name, v)
			}
			s.Reuse = Reuse{Kind: ReuseZipf, S: f}
		default:
			return p.errorf("stream %s: reuse=%s: want uniform, recent or zipf:S", s.Name, v)
		}
	}
	if v, ok := kv["window"]; ok {
		if s.Window, err = parseInt(v, 1, 1<<30); err != nil {
			return p.errorf("stream %s: window=: %v", s.Name, err)
		}
	}
	if v, ok := kv["hold"]; ok {
		if s.Hold, err = parseDuration(v); err != nil {
			return p.errorf("stream %s: %v", s.Name, err)
		}
		if s.Hold >= sc.ReadTTL {
			return p.errorf("stream %s: hold=%s must be shorter than the read TTL %s (declare ttl first to change it)", s.Name, v, sc.ReadTTL)
		}
	}
	_, be := kv["burst-every"]
	_, bl := kv["burst-len"]
	_, bx := kv["burst-x"]
	_, ba := kv["burst-at"]
	if be || bl || bx || ba {
		if !(be && bl && bx) {
			return p.errorf("stream %s: a burst needs burst-every=, burst-len= and burst-x=", s.Name)
		}
		b := &s.Burst
		if b.Every, err = parsePositiveDuration(kv["burst-every"]); err != nil {
			return p.errorf("stream %s: %v", s.Name, err)
		}
		if b.Len, err = parsePositiveDuration(kv["burst-len"]); err != nil {
			return p.errorf("stream %s: %v", s.Name, err)
		}
		if b.Len > b.Every {
			return p.errorf("stream %s: burst-len longer than burst-every", s.Name)
		}
		if b.X, err = strconv.ParseFloat(kv["burst-x"], 64); err != nil || b.X < 0 || math.IsInf(b.X, 0) {
			return p.errorf("stream %s: burst-x=%s is not a non-negative number", s.Name, kv["burst-x"])
		}
		b.At = b.Every
		if ba {
			if b.At, err = parseDuration(kv["burst-at"]); err != nil {
				return p.errorf("stream %s: %v", s.Name, err)
			}
		}
	}
	sc.Streams = append(sc.Streams, s)
	return nil
}

// keyValues parses key=value tokens, each key at most once and among allowed.
func (p *parser) keyValues(a []string, allowed ...string) (map[string]string, error) {
	kv := make(map[string]string, len(a))
	for _, t := range a {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" || v == "" {
			return nil, p.errorf("%q: want key=value", t)
		}
		known := false
		for _, al := range allowed {
			known = known || al == k
		}
		if !known {
			return nil, p.errorf("unknown key %q (want one of %s)", k, strings.Join(allowed, ", "))
		}
		if _, dup := kv[k]; dup {
			return nil, p.errorf("key %q repeated", k)
		}
		kv[k] = v
	}
	return kv, nil
}

func (p *parser) layout(name string) int {
	for i, l := range p.sc.Layouts {
		if l.Name == name {
			return i
		}
	}
	return -1
}

// op parses the arguments of one operation.
func (p *parser) op(k OpKind, a []string) (Op, error) {
	op := Op{Locks: 1}
	switch k {
	case OpAdvance:
		if len(a) != 1 {
			return op, p.errorf("want: advance DURATION")
		}
		d, err := parsePositiveDuration(a[0])
		if err != nil {
			return op, p.errorf("%v", err)
		}
		op.Duration = d
	case OpTraffic:
		if len(a) < 2 {
			return op, p.errorf("want: traffic DURATION STREAM...")
		}
		d, err := parsePositiveDuration(a[0])
		if err != nil {
			return op, p.errorf("%v", err)
		}
		op.Duration = d
		for _, name := range a[1:] {
			i := -1
			for j, s := range p.sc.Streams {
				if s.Name == name {
					i = j
				}
			}
			if i < 0 {
				return op, p.errorf("unknown stream %q", name)
			}
			for _, j := range op.Streams {
				if j == i {
					return op, p.errorf("stream %q listed twice", name)
				}
			}
			op.Streams = append(op.Streams, i)
		}
	case OpEvictTo:
		if len(a) != 1 {
			return op, p.errorf("want: evict-to FRACTION")
		}
		f, err := parseFraction(a[0])
		if err != nil {
			return op, p.errorf("%v", err)
		}
		op.Ratio = f
	case OpClear:
		flags, _, err := p.options(k, a)
		if err != nil {
			return op, err
		}
		op.Force = flags["force"]
	case OpStore, OpRestore, OpReserveWrite:
		if len(a) < 3 {
			return op, p.errorf("want: %s NAME LAYOUT CHUNKS [xREQUESTS] [temp]", k)
		}
		g := Group{Name: a[0], Requests: 1}
		if !validName(g.Name) {
			return op, p.errorf("group name %q: use letters, digits, '-', '_'", g.Name)
		}
		if g.Layout = p.layout(a[1]); g.Layout < 0 {
			return op, p.errorf("unknown layout %q", a[1])
		}
		var err error
		if g.Chunks, err = parseInt(a[2], 1, 1<<20); err != nil {
			return op, p.errorf("chunks: %v", err)
		}
		opts := a[3:]
		if len(opts) > 0 && strings.HasPrefix(opts[0], "x") {
			if g.Requests, err = parseInt(opts[0][1:], 1, 1<<20); err != nil {
				return op, p.errorf("requests %s: %v", opts[0], err)
			}
			opts = opts[1:]
		}
		flags, kv, err := p.options(k, opts)
		if err != nil {
			return op, err
		}
		op.Temp = flags["temp"]
		if v, ok := kv["mode"]; ok {
			switch v {
			case "all":
				op.Mode = l1.ModeAll
			case "new":
				op.Mode = l1.ModeNew
			case "update":
				op.Mode = l1.ModeUpdate
			default:
				return op, p.errorf("mode=%s: want all, new or update", v)
			}
		}
		if v, ok := kv["locks"]; ok {
			if op.Locks, err = parseInt(v, 1, MaxLocks); err != nil {
				return op, p.errorf("locks=: %v", err)
			}
		}
		op.Group = -1
		for i, old := range p.sc.Groups {
			if old.Name == g.Name {
				if old != g {
					return op, p.errorf("group %q was declared with another shape (%s %d x%d)",
						g.Name, p.sc.Layouts[old.Layout].Name, old.Chunks, old.Requests)
				}
				op.Group = i
			}
		}
		if op.Group < 0 {
			op.Group = len(p.sc.Groups)
			p.sc.Groups = append(p.sc.Groups, g)
		}
	default: // the ops on a selection
		if len(a) < 1 {
			return op, p.errorf("want: %s SELECTOR", k)
		}
		sel, err := p.selector(a[0])
		if err != nil {
			return op, err
		}
		op.Sel = sel
		flags, kv, err := p.options(k, a[1:])
		if err != nil {
			return op, err
		}
		op.Force = flags["force"]
		if v, ok := kv["locks"]; ok {
			if op.Locks, err = parseInt(v, 1, MaxLocks); err != nil {
				return op, p.errorf("locks=: %v", err)
			}
		}
	}
	return op, nil
}

// opOptions lists the flags and keys each operation accepts.
var opOptions = map[OpKind][]string{
	OpStore:                  {"temp"},
	OpRestore:                {"temp", "locks="},
	OpReserveWrite:           {"temp", "mode="},
	OpRead:                   {"locks="},
	OpReserveRead:            {"locks="},
	OpFinishRead:             {"locks="},
	OpFinishWriteReserveRead: {"locks="},
	OpDelete:                 {"force"},
	OpClear:                  {"force"},
}

func (p *parser) options(k OpKind, a []string) (flags map[string]bool, kv map[string]string, err error) {
	flags, kv = map[string]bool{}, map[string]string{}
	for _, t := range a {
		key, v, hasV := strings.Cut(t, "=")
		ok := false
		for _, o := range opOptions[k] {
			ok = ok || (hasV && o == key+"=") || (!hasV && o == key)
		}
		if !ok || (hasV && v == "") {
			return nil, nil, p.errorf("%s: unexpected %q (allowed: %s)", k, t, strings.Join(opOptions[k], " "))
		}
		if flags[key] || kv[key] != "" {
			return nil, nil, p.errorf("%s: %q repeated", k, key)
		}
		if hasV {
			kv[key] = v
		} else {
			flags[key] = true
		}
	}
	return flags, kv, nil
}

// selector parses GROUP[.REQUEST][[SLICE]] against the groups declared so
// far. SLICE is I or [I]:[J] with Python semantics: negative indexes count
// from the end.
func (p *parser) selector(s string) (Selector, error) {
	sel := Selector{Request: -1}
	name, slice := s, ""
	if i := strings.IndexByte(s, '['); i >= 0 {
		if !strings.HasSuffix(s, "]") {
			return sel, p.errorf("selector %q: missing ]", s)
		}
		name, slice = s[:i], s[i+1:len(s)-1]
	}
	name, req, hasReq := strings.Cut(name, ".")
	sel.Group = -1
	for i, g := range p.sc.Groups {
		if g.Name == name {
			sel.Group = i
		}
	}
	if sel.Group < 0 {
		return sel, p.errorf("selector %q: no group %q declared by an earlier store, restore or reserve-write", s, name)
	}
	g := p.sc.Groups[sel.Group]
	if hasReq {
		r, err := parseInt(req, 0, g.Requests-1)
		if err != nil {
			return sel, p.errorf("selector %q: request: %v", s, err)
		}
		sel.Request = r
	}
	sel.From, sel.To = 0, g.Chunks
	if slice != "" {
		idx := func(t string, def int) (int, error) {
			if t == "" {
				return def, nil
			}
			n, err := parseInt(t, -g.Chunks, g.Chunks)
			if n < 0 {
				n += g.Chunks
			}
			return n, err
		}
		lo, hi, isRange := strings.Cut(slice, ":")
		var err error
		if sel.From, err = idx(lo, 0); err != nil {
			return sel, p.errorf("selector %q: %v", s, err)
		}
		if !isRange {
			if lo == "" || sel.From >= g.Chunks {
				return sel, p.errorf("selector %q: chunk index out of range", s)
			}
			sel.To = sel.From + 1
		} else if sel.To, err = idx(hi, g.Chunks); err != nil {
			return sel, p.errorf("selector %q: %v", s, err)
		}
		if sel.From >= sel.To {
			return sel, p.errorf("selector %q selects no chunk", s)
		}
	}
	return sel, nil
}

// validName reports whether s is a name: ASCII letters, digits, '-' and
// '_', starting with a letter or digit.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && (r == '-' || r == '_'):
		default:
			return false
		}
	}
	return true
}
