//go:build linux

package shmpage

import (
	"path/filepath"
	"sync/atomic"
	"testing"
)

// TestMap: two mappings of one file see each other's stores; a file that
// does not exist is an error unless created; create starts from zeros.
func TestMap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "board")
	if _, _, err := Map(path, false); err == nil {
		t.Fatal("mapped a missing file without create")
	}
	p, unmap, err := Map(path, true)
	if err != nil {
		t.Fatal(err)
	}
	q, unmapQ, err := Map(path, false)
	if err != nil {
		t.Fatal(err)
	}
	(*atomic.Uint64)(p).Store(42)
	if v := (*atomic.Uint64)(q).Load(); v != 42 {
		t.Fatalf("the second mapping reads %d, want 42", v)
	}
	unmap()
	unmapQ()
	p, unmap, err = Map(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	if v := (*atomic.Uint64)(p).Load(); v != 0 {
		t.Fatalf("create kept %d, want a page of zeros", v)
	}
}
