//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/bench/trace"
)

// TestRequestsFile: the requests file carries the trace's requests, their
// blocks and their partial last blocks; a truncated file is refused.
func TestRequestsFile(t *testing.T) {
	tr, err := trace.Parse("t", strings.NewReader(`{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [7, 8]}
{"timestamp": 5, "input_length": 700, "output_length": 1, "hash_ids": [7, 9]}
`), 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "requests")
	if err := writeRequests(path, tr); err != nil {
		t.Fatal(err)
	}
	rs, err := readRequests(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || !slices.Equal(rs[0].blocks, []int32{0, 1}) || rs[0].partial || !slices.Equal(rs[1].blocks, []int32{0, 2}) || !rs[1].partial {
		t.Fatalf("%+v", rs)
	}
	data, _ := os.ReadFile(path)
	for _, cut := range []int{0, 5, len(data) - 1} {
		os.WriteFile(path, data[:cut], 0o600)
		if _, err := readRequests(path); err == nil {
			t.Errorf("a file cut at %d of %d bytes", cut, len(data))
		}
	}
}

// TestStamps: a block's stamps check for that block only, at their own
// ends.
func TestStamps(t *testing.T) {
	obj := make([]byte, 1<<20)
	writeStamps(obj, 42)
	if err := checkStamps(obj, 42); err != nil {
		t.Fatal(err)
	}
	if err := checkStamps(obj, 43); err == nil {
		t.Error("block 42's stamps pass for block 43")
	}
	swapped := make([]byte, len(obj))
	copy(swapped, obj[len(obj)-stampSize:])
	copy(swapped[len(obj)-stampSize:], obj[:stampSize])
	if err := checkStamps(swapped, 42); err == nil {
		t.Error("swapped ends pass")
	}
	if err := checkStamps(make([]byte, 1<<20), 0); err == nil {
		t.Error("a zero object passes for block 0")
	}
	if k1, k2 := keyOf(1), keyOf(1<<8); k1 == k2 || k1.Model != model {
		t.Errorf("keys %v, %v", k1, k2)
	}
}

// TestClientEnv: each seat's environment names its own board, even when
// the shared environment has room to grow in place (os.Environ's usually
// does), where an append in place handed the next seat's board to the
// first.
func TestClientEnv(t *testing.T) {
	shared := make([]string, 2, 16)
	shared[0], shared[1] = "A=1", "B=2"
	s := &supervisor{env: shared}
	e0 := s.clientEnv(0, 1, "board-0")
	e1 := s.clientEnv(1, 1, "board-1")
	if !slices.Contains(e0, envBoard+"=board-0") || slices.Contains(e0, envBoard+"=board-1") {
		t.Fatalf("seat 0's environment: %q", e0)
	}
	if !slices.Contains(e1, envBoard+"=board-1") || !slices.Contains(e1, envSlot+"=1") || e1[0] != "A=1" {
		t.Fatalf("seat 1's environment: %q", e1)
	}
}
