package fuzzcorpus

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSync: Sync with update writes every seed, without it finds them in
// step, and then reports a seed whose file changed and one whose file
// is gone, each by its path.
func TestSync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "FuzzX")
	seeds := []Seed{{"a", []byte("x\x00\"y")}, {"b", nil}, {"c", []byte{0xff}}}
	if errs := Sync(dir, seeds, true); len(errs) != 0 {
		t.Fatal(errs)
	}
	if errs := Sync(dir, seeds, false); len(errs) != 0 {
		t.Fatalf("just written: %v", errs)
	}
	if err := os.WriteFile(filepath.Join(dir, "a"), File([]byte("other")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	errs := Sync(dir, seeds, false)
	if len(errs) != 2 {
		t.Fatalf("a changed and c gone: %v", errs)
	}
	t.Log(errs)
}
