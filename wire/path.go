package wire

import (
	"os"
	"path/filepath"
	"strconv"
)

// RootSocketDir is the default socket directory of a daemon run as root:
// a directory of root's under /run, which no other user can write.
const RootSocketDir = "/run/kvallocd"

// SocketName is the socket's file name in the default directory.
const SocketName = "kvallocd.sock"

// DefaultSocketDir is the directory of DefaultSocketPath, one that only the
// daemon's user can write:
//
//   - RootSocketDir for root (effective uid 0);
//   - else $XDG_RUNTIME_DIR when that variable is set (the user's runtime
//     directory, mode 0700);
//   - else PrivateSocketDir.
//
// The daemon creates RootSocketDir and PrivateSocketDir when they are
// missing and refuses a directory that another user owns or can write.
func DefaultSocketDir() string {
	if os.Geteuid() == 0 {
		return RootSocketDir
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d
	}
	return PrivateSocketDir()
}

// PrivateSocketDir is the default socket directory of a user without
// $XDG_RUNTIME_DIR: kvallocd-<uid> in os.TempDir, which the daemon creates
// with mode 0700 and must find a real directory (not a symlink), owned by
// its uid, of mode 0700.
func PrivateSocketDir() string {
	return filepath.Join(os.TempDir(), "kvallocd-"+strconv.Itoa(os.Geteuid()))
}

// DefaultSocketPath is where the daemon listens and clients connect when
// told nothing: SocketName in DefaultSocketDir. A client of another user's
// daemon names its path.
func DefaultSocketPath() string {
	return filepath.Join(DefaultSocketDir(), SocketName)
}
