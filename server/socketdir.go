//go:build linux

package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/kvalloc/kvalloc/wire"
)

// ErrUnsafePath is wrapped by New's error when the socket's directory, one
// of the directories above it, or the lock file could be changed by
// another user: the daemon refuses to listen there.
var ErrUnsafePath = errors.New("kvallocd: unsafe socket path")

// socketDir makes the directory of the socket path ready and checks it,
// and returns it with its symlinks resolved: listen then works in that
// checked directory alone, so no symlink another user controls can move
// the socket or its lock elsewhere.
//
// The default directories are created when missing: wire.RootSocketDir
// (mode 0755, so that the allowed uids reach the socket, whose own mode
// admits them), and wire.PrivateSocketDir (mode 0700), which must then be
// a real directory, not a symlink, owned by the daemon's uid, of mode 0700
// exactly. Every path, default or not, must resolve to a directory owned
// by root or the daemon's uid that neither group nor others can write,
// under directories owned by root or the daemon's uid that only they can
// write, or that are sticky (as /tmp is).
func socketDir(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("kvallocd: socket path %s: %w", path, err)
	}
	dir := filepath.Dir(abs)
	uid := uint32(os.Geteuid())
	switch {
	case uid == 0 && dir == wire.RootSocketDir:
		if err := makeDir(dir, 0o755); err != nil {
			return "", err
		}
	case dir == wire.PrivateSocketDir():
		if err := makeDir(dir, 0o700); err != nil {
			return "", err
		}
		fi, err := os.Lstat(dir)
		if err != nil {
			return "", fmt.Errorf("kvallocd: socket directory: %w", err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode().Type() != fs.ModeDir:
			return "", fmt.Errorf("%w: %s is not a directory (%v) but must be this daemon's private one", ErrUnsafePath, dir, fi.Mode().Type())
		case st.Uid != uid:
			return "", fmt.Errorf("%w: %s is owned by uid %d, not by this daemon's uid %d: another user made it; remove it, or name another -socket", ErrUnsafePath, dir, st.Uid, uid)
		case fi.Mode().Perm() != 0o700:
			return "", fmt.Errorf("%w: %s has mode %v, not 0700", ErrUnsafePath, dir, fi.Mode().Perm())
		}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("kvallocd: socket directory: %w", err)
	}
	for d, top := real, true; ; d, top = filepath.Dir(d), false {
		if err := checkDir(d, uid, top); err != nil {
			return "", err
		}
		if d == "/" || d == "." {
			break
		}
	}
	return real, nil
}

// makeDir creates dir with mode perm, exactly (whatever the umask), unless
// it exists.
func makeDir(dir string, perm os.FileMode) error {
	err := os.Mkdir(dir, perm)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kvallocd: socket directory: %w", err)
	}
	if err := os.Chmod(dir, perm); err != nil {
		return fmt.Errorf("kvallocd: socket directory: %w", err)
	}
	return nil
}

// checkDir refuses a directory on the socket's path that a user other
// than root and uid could change: one owned by another uid, or one that
// group or others can write (allowed above the socket's own directory
// when it is sticky: there others can add entries but not move ours).
func checkDir(d string, uid uint32, top bool) error {
	fi, err := os.Lstat(d)
	if err != nil {
		return fmt.Errorf("kvallocd: socket directory: %w", err)
	}
	if fi.Mode().Type() != fs.ModeDir {
		return fmt.Errorf("%w: %s changed under the daemon: it is a %v, not a directory", ErrUnsafePath, d, fi.Mode().Type())
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 0 && st.Uid != uid {
		return fmt.Errorf("%w: %s is owned by uid %d, not by root or this daemon's uid %d", ErrUnsafePath, d, st.Uid, uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && (top || fi.Mode()&fs.ModeSticky == 0) {
		what := "the socket's directory"
		if !top {
			what = "a directory above the socket, not sticky,"
		}
		return fmt.Errorf("%w: %s %s has mode %v: other users can write it (name a -socket in a directory only this daemon's user can write)", ErrUnsafePath, what, d, fi.Mode().Perm())
	}
	return nil
}
