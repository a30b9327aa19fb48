package l2_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/l2"
)

// TestReadSecretFile: a secret is read from a regular file of mode 0600
// or 0400 (one trailing newline dropped), and refused, with a reason,
// from a file group or others may read, a symlink, a directory, or an
// empty one; a MAC secret under 32 bytes is refused.
func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		data string
		mode os.FileMode
		want string
	}{{"pw\n", 0o600, "pw"}, {"pw\r\n", 0o400, "pw"}, {"p w\n\n", 0o600, "p w\n"}} {
		got, err := l2.ReadSecretFile(write("ok", c.data, c.mode))
		if err != nil || string(got) != c.want {
			t.Errorf("%q, mode %o: %q, %v", c.data, c.mode, got, err)
		}
		os.Remove(filepath.Join(dir, "ok"))
	}
	good := write("good", strings.Repeat("s", 40), 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ path, says string }{
		"group-readable": {write("g", "pw", 0o640), "mode 0640"},
		"world-readable": {write("w", "pw", 0o604), "mode 0604"},
		"a symlink":      {link, "symbolic link"},
		"a directory":    {dir, "not a regular file"},
		"empty":          {write("e", "\n", 0o600), "empty"},
		"absent":         {filepath.Join(dir, "none"), "no such file"},
	} {
		if _, err := l2.ReadSecretFile(c.path); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want a refusal saying %q", name, err, c.says)
		}
	}
	if _, err := l2.ReadSecret(write("short", strings.Repeat("s", 31), 0o600)); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("a 31-byte MAC secret: %v", err)
	}
	s, err := l2.ReadSecret(good)
	if err != nil || s.ID() == 0 {
		t.Fatalf("%v, %v", s, err)
	}
	s2, _ := l2.NewSecret(bytes.Repeat([]byte("s"), 40))
	if s2.ID() != s.ID() {
		t.Fatal("the same secret, another key id")
	}
}
