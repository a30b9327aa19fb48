//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const shape = "../../../testdata/scenarios/shared-prefix.shape"

// TestRunPrintsTheTables: a short run prints every table, writes
// cluster.md, and passes the daemons' agreement.
func TestRunPrintsTheTables(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	err := run([]string{"-stated", "-daemons-l2=false", "-nodes", "2", "-q", "1", "-max-requests", "800", "-out", dir, shape}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	for _, s := range []string{"ideal: hit", "What L2 moves", "Recommended default", "Redis allkeys-lru", "Through real kvallocd daemons", "L2 hit pays", "L2 hits counted"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q", s)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "cluster.md"))
	if err != nil || !bytes.Contains(md, []byte("| nodes |")) {
		t.Fatalf("cluster.md: %v", err)
	}
}

// TestRunRejects: bad flags and files are errors.
func TestRunRejects(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-nodes", "0", shape},
		{"-q", "-1", shape},
		{"-l2-evict", "fifo", shape},
		{"-l2-piece-sizes", "256k", shape},
		{"-l2-piece-sizes", "-1", shape},
		{"-stated", "no-such-file.jsonl"},
	} {
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
