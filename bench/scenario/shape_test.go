package scenario

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/bench/trace"
)

const shapeFile = "../../testdata/scenarios/shared-prefix.shape"

// TestShapeFileGeneratesAMooncakeTrace: the committed shape parses, and
// what it generates is a trace that bench/trace's reader takes, with the
// counts Generate reports and prompts that share segment blocks across
// conversations.
func TestShapeFileGeneratesAMooncakeTrace(t *testing.T) {
	s, err := ParseShapeFile(shapeFile)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "shared-prefix" || s.Seed != 28 || len(s.Segments) != 3 || s.BlockTokens != 512 {
		t.Fatalf("parsed %+v", s)
	}
	var buf bytes.Buffer
	st, err := s.Generate(&buf)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Parse("shared-prefix", &buf, int64(s.BlockTokens))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Requests) != st.Requests || tr.Refs != st.Refs || int64(tr.Distinct) != st.Blocks {
		t.Fatalf("reader: %d requests, %d refs, %d distinct; generator: %+v", len(tr.Requests), tr.Refs, tr.Distinct, st)
	}
	if st.Requests < 10000 || st.Requests > 14000 {
		t.Fatalf("%d requests: the shape is sized like the Mooncake trace (12,031)", st.Requests)
	}
	if frac := crossShare(tr, st); frac < 0.3 {
		t.Fatalf("only %.1f%% of block references reuse another conversation's block", 100*frac)
	}
	// The check bites: without its shared segments the shape's
	// conversations share nothing.
	s.Segments = nil
	buf.Reset()
	if st, err = s.Generate(&buf); err != nil {
		t.Fatal(err)
	}
	if tr, err = trace.Parse("no-segments", &buf, 512); err != nil {
		t.Fatal(err)
	}
	if frac := crossShare(tr, st); frac != 0 {
		t.Fatalf("without segments %.1f%% of references are to another conversation's blocks", 100*frac)
	}
}

// crossShare returns the share of tr's block references to a block that
// another conversation referred to first.
func crossShare(tr *trace.Trace, st *ShapeTrace) float64 {
	owner := make([]int32, tr.Distinct)
	for i := range owner {
		owner[i] = -1
	}
	cross := int64(0)
	for i, r := range tr.Requests {
		c := st.Conversation[i]
		for _, b := range r.Blocks {
			switch owner[b] {
			case -1:
				owner[b] = c
			case c:
			default:
				cross++
			}
		}
	}
	return float64(cross) / float64(tr.Refs)
}

// TestShapeGenerateIsDeterministic: the same shape gives the same bytes;
// another seed gives others.
func TestShapeGenerateIsDeterministic(t *testing.T) {
	s, err := ParseShapeFile(shapeFile)
	if err != nil {
		t.Fatal(err)
	}
	s.Span /= 10
	var a, b, c bytes.Buffer
	if _, err := s.Generate(&a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Generate(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two generations of one shape differ")
	}
	s.Seed++
	if _, err := s.Generate(&c); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Fatal("another seed gave the same trace")
	}
}

// TestShapeRejects: every malformed shape is an error wrapping ErrShape
// that names its line.
func TestShapeRejects(t *testing.T) {
	const ok = "span 1h\nconversations rate=1/s turns=1..3 think=10s\nuser first=600..900 next=10..20\noutput 10..20\n"
	if _, err := ParseShape("x", []byte(ok)); err != nil {
		t.Fatalf("the base shape: %v", err)
	}
	for _, c := range []struct{ text, want string }{
		{"span 1h\nspan 2h\n", "2: \"span\" repeated"},
		{"spam 1h\n", "1: unknown keyword"},
		{ok + "segment doc count=0 blocks=1\n", "5: segment doc count="},
		{ok + "segment doc count=3 blocks=4..2\n", "low end above high end"},
		{ok + "segment doc count=3 blocks=2 zipf=1\n", "want a number > 1"},
		{ok + "segment doc count=3 blocks=2 share=2\n", "outside [0, 1]"},
		{ok + "segment doc count=3 blocks=2\nsegment doc count=3 blocks=2\n", "declared twice"},
		{ok + "segment doc blocks=2\n", "count= and blocks= are required"},
		{ok + "segment doc count=3 blocks=2 color=red\n", "unknown key"},
		{strings.Replace(ok, "rate=1/s", "rate=0/s", 1), "positive RATE"},
		{strings.Replace(ok, "span 1h\n", "", 1), "missing \"span\""},
		{strings.Replace(ok, "output 10..20\n", "", 1), "missing \"output\""},
		{ok + "seed -1\n", "seed"},
		{ok + "shape a/b\n", "shape name"},
		{ok + "block-tokens 0\n", "block-tokens"},
		{ok + "seed 1\x01\n", "control byte"},
	} {
		_, err := ParseShape("x", []byte(c.text))
		if err == nil || !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an ErrShape containing %q", c.text, err, c.want)
		}
	}
}
