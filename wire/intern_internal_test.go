package wire

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
)

// TestInternBounded: a Decoder kept for a connection's life, fed 1024
// requests that each name a new 4 KiB model, keeps at most internBytes of
// interned strings, and still interns a model that repeats.
func TestInternBounded(t *testing.T) {
	var enc Encoder
	var d Decoder
	var q Request
	for i := range 1000 {
		model := fmt.Sprintf("%06d", i) + strings.Repeat("m", MaxStringLen-6)
		f, err := enc.AppendRequest(nil, &Request{Type: TypeTouch, ID: 1, Epoch: 1, Keys: []l1.ObjectKey{{ChunkHash: "h", Model: model}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.DecodeRequest(f, &q); err != nil || q.Keys[0].Model != model {
			t.Fatalf("decode %d: %v", i, err)
		}
	}
	held := 0
	for s := range d.interned {
		held += len(s)
	}
	if held > internBytes || held != d.internedLen {
		t.Fatalf("the intern table holds %d bytes (counted %d), at most %d", held, d.internedLen, internBytes)
	}
	f, _ := enc.AppendRequest(nil, &Request{Type: TypeTouch, ID: 1, Epoch: 1, Keys: []l1.ObjectKey{{ChunkHash: "a", Model: "same"}, {ChunkHash: "b", Model: "same"}}})
	if err := d.DecodeRequest(f, &q); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.interned["same"]; !ok {
		t.Fatal("a repeated model is not interned")
	}
}
