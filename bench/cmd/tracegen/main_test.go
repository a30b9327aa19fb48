package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const shape = "../../../testdata/scenarios/shared-prefix.shape"

// TestRunWritesTheTrace: the file and standard output get the same bytes,
// and the summary names the shape.
func TestRunWritesTheTrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	var out, errb bytes.Buffer
	if err := run([]string{"-o", path, shape}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || !strings.Contains(errb.String(), "shared-prefix: ") {
		t.Fatalf("stdout %d bytes, stderr %q", out.Len(), errb.String())
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if err := run([]string{shape}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, out.Bytes()) || !bytes.HasPrefix(file, []byte(`{"timestamp": `)) {
		t.Fatal("the file and standard output differ, or are not Mooncake JSONL")
	}
}

// TestRunRejects: no file, two files, a malformed shape.
func TestRunRejects(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.shape")
	if err := os.WriteFile(bad, []byte("spam 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{}, {shape, shape}, {bad}} {
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
