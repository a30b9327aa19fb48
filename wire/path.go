package wire

import (
	"os"
	"path/filepath"
	"strconv"
)

// DefaultSocketPath is where the daemon listens and clients connect when
// told nothing: $XDG_RUNTIME_DIR/kvallocd.sock when that variable is set
// (a per-user directory of mode 0700), else /tmp/kvallocd-<uid>.sock.
func DefaultSocketPath() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "kvallocd.sock")
	}
	return filepath.Join(os.TempDir(), "kvallocd-"+strconv.Itoa(os.Getuid())+".sock")
}
