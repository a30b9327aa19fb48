package wire_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kvalloc/kvalloc/wire"
)

// TestDefaultSocketPath: root's default is in /run/kvallocd; another
// user's in $XDG_RUNTIME_DIR, else in its private directory in $TMPDIR.
func TestDefaultSocketPath(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/4242")
	t.Setenv("TMPDIR", "/scratch")
	want := "/run/user/4242/kvallocd.sock"
	if os.Geteuid() == 0 {
		want = "/run/kvallocd/kvallocd.sock"
	}
	if got := wire.DefaultSocketPath(); got != want {
		t.Fatalf("DefaultSocketPath %s, want %s", got, want)
	}
	if got, want := wire.PrivateSocketDir(), filepath.Join("/scratch", "kvallocd-"+strconv.Itoa(os.Geteuid())); got != want {
		t.Fatalf("PrivateSocketDir %s, want %s", got, want)
	}
	if os.Geteuid() != 0 {
		t.Setenv("XDG_RUNTIME_DIR", "")
		if got, want := wire.DefaultSocketPath(), filepath.Join(wire.PrivateSocketDir(), "kvallocd.sock"); got != want {
			t.Fatalf("without XDG_RUNTIME_DIR: %s, want %s", got, want)
		}
	}
}
