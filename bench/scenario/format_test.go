package scenario

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/l1"
)

const minimal = "layout c 64KiB\npool 4*c\nstore s c 1\n"

func TestParseHeader(t *testing.T) {
	src := `# comment line
scenario demo-1   # trailing comment
outcome first line
outcome second   line  
seed 42
align 8KiB
layout big 7.5MiB
layout small 100
pool 10*big
sweep every=500ms watermark=90% ratio=0.25
ttl write=10m read=30s
stream s1 layout=small rate=120/m chunks=2..5 reads=0.5 reuse=zipf:1.5 window=7 hold=2s burst-every=1h burst-len=1m burst-x=3 burst-at=0s
stream s2 layout=big rate=0.5/s chunks=3
plot every=1m onepass/scattered/periodic none/contiguous/on-demand

traffic 1h s1 s2
`
	sc, err := Parse("file-name", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "demo-1" || sc.Seed != 42 || sc.Align != 8192 {
		t.Errorf("name %q seed %d align %d", sc.Name, sc.Seed, sc.Align)
	}
	if want := []string{"first line", "second   line"}; strings.Join(sc.Outcome, "|") != strings.Join(want, "|") {
		t.Errorf("outcome %q, want %q", sc.Outcome, want)
	}
	if len(sc.Layouts) != 2 || sc.Layouts[0].Size != 7680<<10 || sc.Layouts[1].Size != 100 {
		t.Errorf("layouts %+v", sc.Layouts)
	}
	if sc.AlignedSize(1) != 8192 || sc.Pool != 10*(7680<<10) || sc.Slots(0) != 10 {
		t.Errorf("aligned %d pool %d slots %d", sc.AlignedSize(1), sc.Pool, sc.Slots(0))
	}
	if sc.Sweep != (sim.Controller{Every: 500 * time.Millisecond, Watermark: 0.9, Ratio: 0.25}) {
		t.Errorf("sweep %+v", sc.Sweep)
	}
	if sc.WriteTTL != 10*time.Minute || sc.ReadTTL != 30*time.Second {
		t.Errorf("ttl %v %v", sc.WriteTTL, sc.ReadTTL)
	}
	s := sc.Streams[0]
	want := Stream{Name: "s1", Line: 12, Layout: 1, Rate: 2, MinChunks: 2, MaxChunks: 5, Reads: 0.5,
		Reuse: Reuse{ReuseZipf, 1.5}, Window: 7, Hold: 2 * time.Second,
		Burst: Burst{Every: time.Hour, Len: time.Minute, At: 0, X: 3}}
	if s != want {
		t.Errorf("stream\n got %+v\nwant %+v", s, want)
	}
	s2 := sc.Streams[1]
	if s2.Rate != 0.5 || s2.MinChunks != 3 || s2.MaxChunks != 3 || s2.Window != DefaultWindow || s2.Reuse.Kind != ReuseUniform || s2.Burst.Every != 0 {
		t.Errorf("defaults %+v", s2)
	}
	if sc.Plot == nil || sc.Plot.Every != time.Minute || len(sc.Plot.Policies) != 2 {
		t.Errorf("plot %+v", sc.Plot)
	}
	if len(sc.Ops) != 1 || sc.Ops[0].Kind != OpTraffic || sc.Ops[0].Duration != time.Hour || len(sc.Ops[0].Streams) != 2 || sc.Ops[0].Line != 16 {
		t.Errorf("ops %+v", sc.Ops)
	}
	if sc.Duration(0) != time.Hour || sc.Duration(time.Minute) != time.Minute {
		t.Errorf("duration %v %v", sc.Duration(0), sc.Duration(time.Minute))
	}
}

func TestParseDefaults(t *testing.T) {
	sc, err := Parse("dflt", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if sc.Name != "dflt" || sc.Align != DefaultAlign || sc.Sweep.Every != time.Second ||
		sc.Sweep.Watermark != 0.8 || sc.Sweep.Ratio != 0.2 || sc.WriteTTL != 600*time.Second || sc.ReadTTL != 300*time.Second {
		t.Errorf("defaults %+v", sc)
	}
	// CRLF line ends and tabs are accepted.
	sc2, err := Parse("dflt", []byte(strings.ReplaceAll("layout\tc\t64KiB\npool 4*c\nstore s c 1\n", "\n", "\r\n")))
	if err != nil || sc2.Pool != 4*65536 {
		t.Errorf("CRLF: %v %+v", err, sc2)
	}
}

func TestParseOps(t *testing.T) {
	src := `layout c 64KiB
pool 64*c
store a c 8 x4 temp
restore b c 3 locks=2
reserve-write w c 2 x2 mode=update
reserve-write a c 8 x4
read a[0:7] locks=3
reserve-read a.2[-1]
finish-read a[:-1] locks=1
finish-write w.1
finish-write-reserve-read w[1:]
abort-write w
delete a[2] force
touch b
clear force
evict-to 50%
advance 1h30m
`
	sc, err := Parse("ops", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Groups) != 3 {
		t.Fatalf("groups %+v", sc.Groups)
	}
	if g := sc.Groups[0]; g != (Group{Name: "a", Layout: 0, Chunks: 8, Requests: 4}) {
		t.Errorf("group a %+v", g)
	}
	type want struct {
		kind  OpKind
		group int
		sel   Selector
		locks int
		temp  bool
		force bool
		mode  l1.Mode
	}
	all := func(g, n int) Selector { return Selector{Group: g, Request: -1, From: 0, To: n} }
	wants := []want{
		{kind: OpStore, group: 0, locks: 1, temp: true},
		{kind: OpRestore, group: 1, locks: 2},
		{kind: OpReserveWrite, group: 2, locks: 1, mode: l1.ModeUpdate},
		{kind: OpReserveWrite, group: 0, locks: 1},
		{kind: OpRead, sel: Selector{0, -1, 0, 7}, locks: 3},
		{kind: OpReserveRead, sel: Selector{0, 2, 7, 8}, locks: 1},
		{kind: OpFinishRead, sel: Selector{0, -1, 0, 7}, locks: 1},
		{kind: OpFinishWrite, sel: Selector{2, 1, 0, 2}, locks: 1},
		{kind: OpFinishWriteReserveRead, sel: Selector{2, -1, 1, 2}, locks: 1},
		{kind: OpAbortWrite, sel: all(2, 2), locks: 1},
		{kind: OpDelete, sel: Selector{0, -1, 2, 3}, locks: 1, force: true},
		{kind: OpTouch, sel: all(1, 3), locks: 1},
		{kind: OpClear, locks: 1, force: true},
		{kind: OpEvictTo, locks: 1},
		{kind: OpAdvance, locks: 1},
	}
	if len(sc.Ops) != len(wants) {
		t.Fatalf("%d ops, want %d", len(sc.Ops), len(wants))
	}
	for i, w := range wants {
		op := sc.Ops[i]
		got := want{op.Kind, op.Group, op.Sel, op.Locks, op.Temp, op.Force, op.Mode}
		if op.Kind != OpStore && op.Kind != OpRestore && op.Kind != OpReserveWrite {
			got.group = 0
		}
		if got != w {
			t.Errorf("op %d (line %d): got %+v, want %+v", i, op.Line, got, w)
		}
		if op.Line != i+3 {
			t.Errorf("op %d: line %d, want %d", i, op.Line, i+3)
		}
	}
	if sc.Ops[13].Ratio != 0.5 || sc.Ops[14].Duration != 90*time.Minute {
		t.Errorf("evict-to %v advance %v", sc.Ops[13].Ratio, sc.Ops[14].Duration)
	}
}

func TestParseErrors(t *testing.T) {
	head := "layout c 64KiB\npool 4*c\n"
	cases := []struct {
		src, want string
	}{
		{"", "missing pool directive"},
		{head, "no operations"},
		{"layout c 64KiB\nstore s c 1\n", "2: missing pool"},
		{"pool 1MiB\nstore s c 1\n", "2: missing layout"},
		{head + "frobnicate\n", "3: unknown keyword \"frobnicate\""},
		{head + "store s c 1\nseed 3\n", "4: header directive \"seed\" after the first operation"},
		{"seed 1\nseed 2\n" + head + "store s c 1\n", "2: \"seed\" repeated (first on line 1)"},
		{"layout c 64KiB\nlayout c 1KiB\n", "2: layout \"c\" declared twice"},
		{"layout c 64KiB\npool 4*d\nstore s c 1\n", "2: pool 4*d: unknown layout"},
		{"layout c 64KiB\npool 1000\nstore s c 1\n", "2: pool 1000 is not a multiple of align"},
		{"layout c 64KiB\npool 32KiB\nstore s c 1\n", "larger than the pool"},
		{"align 3000\n" + head + "store s c 1\n", "1: align 3000 is not a power of two"},
		{"layout c 1.5B\n", "1: size \"1.5B\": not a whole number of bytes"},
		{"layout c -4KiB\n", "1: size \"-4KiB\""},
		{"layout c 4KB\n", "1: size \"4KB\""},
		{"sweep watermark=1.5\n", "1: fraction \"1.5\": outside [0, 1]"},
		{"sweep every=0s\n", "must be positive"},
		{"sweep period=1s\n", "1: unknown key \"period\""},
		{"sweep ratio=0.1 ratio=0.2\n", "key \"ratio\" repeated"},
		{"ttl read=1s\n" + head + "stream s layout=c rate=1/s chunks=1 hold=1s\n", "hold=1s must be shorter than the read TTL"},
		{head + "stream s layout=c rate=1/s\n", "missing chunks="},
		{head + "stream s layout=d rate=1/s chunks=1\n", "unknown layout \"d\""},
		{head + "stream s layout=c rate=1 chunks=1\n", "rate \"1\": want N/UNIT"},
		{head + "stream s layout=c rate=1/s chunks=5..2\n", "chunks=5..2"},
		{head + "stream s layout=c rate=1/s chunks=1 reuse=zipf:1\n", "the Zipf exponent must be a number > 1"},
		{head + "stream s layout=c rate=1/s chunks=1 burst-x=2\n", "a burst needs burst-every=, burst-len= and burst-x="},
		{head + "stream s layout=c rate=1/s chunks=1 burst-every=1m burst-len=2m burst-x=2\n", "burst-len longer than burst-every"},
		{head + "stream s layout=c rate=1/s chunks=1\nstream s layout=c rate=1/s chunks=1\n", "stream \"s\" declared twice (line 3)"},
		{head + "traffic 1m nope\n", "3: unknown stream \"nope\""},
		{head + "stream s layout=c rate=1/s chunks=1\ntraffic 1m s s\n", "listed twice"},
		{head + "traffic 1m\n", "want: traffic DURATION STREAM..."},
		{head + "advance -1s\n", "negative"},
		{head + "advance soon\n", "duration \"soon\""},
		{head + "store s c 0\n", "chunks: 0 is outside"},
		{head + "store s c 1 x0\n", "requests x0"},
		{head + "store s d 1\n", "unknown layout \"d\""},
		{head + "store s.1 c 1\n", "group name \"s.1\""},
		{head + "store s c 1 force\n", "store: unexpected \"force\""},
		{head + "store s c 1 temp temp\n", "\"temp\" repeated"},
		{head + "store s c 1\nstore s c 2\n", "group \"s\" was declared with another shape"},
		{head + "reserve-write s c 1 mode=old\n", "mode=old"},
		{head + "restore s c 1 locks=129\n", "locks=: 129 is outside [1, 128]"},
		{head + "read s\n", "no group \"s\" declared"},
		{head + "store s c 4\nread s[4]\n", "chunk index out of range"},
		{head + "store s c 4\nread s[2:2]\n", "selects no chunk"},
		{head + "store s c 4\nread s[0:9]\n", "9 is outside"},
		{head + "store s c 4\nread s.1\n", "request: 1 is outside [0, 0]"},
		{head + "store s c 4\nread s[1\n", "missing ]"},
		{head + "evict-to 2\n", "outside [0, 1]"},
		{head + "clear please\n", "clear: unexpected \"please\""},
		{"plot onepass/nowhere/periodic\n", "policy \"onepass/nowhere/periodic\""},
		{"plot every=1m\n", "want: plot [every=D] POLICY..."},
		{"scenario bad.name\n", "want: scenario NAME"},
		{"outcome\n", "want: outcome TEXT"},
		{head + "store s c 1\x01\n", "3: control byte 0x01 outside a comment"},
		{"\xff\n", "not valid UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse("x", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.src, err, c.want)
		}
	}
}

func TestUnits(t *testing.T) {
	sizes := map[string]int64{"1": 1, "4096": 4096, "1B": 1, "2KiB": 2048, "1.5MiB": 1536 << 10, "1GiB": 1 << 30, "2TiB": 2 << 40}
	for s, want := range sizes {
		if got, err := parseSize(s); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "KiB", "0", "-1", "1.5", "1e3x", "9999999TiB", "NaNB"} {
		if _, err := parseSize(s); err == nil {
			t.Errorf("parseSize(%q) accepted", s)
		}
	}
	rates := map[string]float64{"2/s": 2, "120/m": 2, "3600/h": 1, "1/500ms": 2, "3/10s": 0.3, "0/s": 0}
	for s, want := range rates {
		if got, err := parseRate(s); err != nil || got < want*0.999999 || got > want*1.000001 {
			t.Errorf("parseRate(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"2", "2/", "-1/s", "x/s", "1/0s", "1/-1s"} {
		if _, err := parseRate(s); err == nil {
			t.Errorf("parseRate(%q) accepted", s)
		}
	}
	if f, err := parseFraction("80%"); err != nil || f != 0.8 {
		t.Errorf("parseFraction(80%%) = %v, %v", f, err)
	}
}

func TestPolicies(t *testing.T) {
	ps := Policies()
	if len(ps) != 18 {
		t.Fatalf("%d policies, want 18", len(ps))
	}
	seen := map[string]bool{}
	for _, p := range ps {
		q, err := ParsePolicy(p.String())
		if err != nil || q != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p, q, err)
		}
		seen[p.String()] = true
	}
	if len(seen) != 18 || !seen["onepass/contiguous-first/on-demand"] || !seen["none/contiguous/periodic"] {
		t.Errorf("names %v", seen)
	}
	for pat, n := range map[string]int{"": 18, "*/*/*": 18, "onepass/*/*": 6, "*/scattered/on-demand": 3, "none/contiguous/periodic": 1} {
		got, err := MatchPolicies(pat)
		if err != nil || len(got) != n {
			t.Errorf("MatchPolicies(%q) = %d policies, %v; want %d", pat, len(got), err, n)
		}
	}
	for _, pat := range []string{"onepass", "x/*/*", "*/*/*/*"} {
		if _, err := MatchPolicies(pat); err == nil {
			t.Errorf("MatchPolicies(%q) accepted", pat)
		}
	}
	if _, err := ParsePolicy("onepass/scattered"); err == nil {
		t.Error("ParsePolicy accepted two parts")
	}
	if sim.Control(9).String() != "Control(9)" || OpKind(99).String() != "OpKind(99)" {
		t.Error("unknown enum names")
	}
}

// TestFormatDocExamples parses every fenced block of FORMAT.md marked
// "scn", so the documentation cannot drift from the parser.
func TestFormatDocExamples(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(scenarioDir, "FORMAT.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```scn\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) == 0 {
		t.Fatal("FORMAT.md has no ```scn block")
	}
	for i, b := range blocks {
		if _, err := Parse("example", b[1]); err != nil {
			t.Errorf("FORMAT.md example %d: %v\n%s", i+1, err, b[1])
		}
	}
}
