//go:build linux

package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrInUse is wrapped by New's error when another daemon serves the
// socket path.
var ErrInUse = errors.New("kvallocd: socket in use")

// listener is the daemon's socket and the lock that makes it its own.
type listener struct {
	ln   *net.UnixListener
	path string
	lock *os.File // path + ".lock", flock'ed for the daemon's life
}

// listen takes path for this daemon:
//
//  1. It checks the path's directory (socketDir): one that another user
//     could change is refused with ErrUnsafePath; a missing default one
//     is made. The steps below work in that directory, symlinks resolved.
//  2. It locks path+".lock" (flock, LOCK_EX|LOCK_NB), held until close.
//     The lock file is opened with O_NOFOLLOW, and must be a regular file
//     of the daemon's uid: a symlink or another user's file is refused
//     with ErrUnsafePath. Another daemon holding it is refused with
//     ErrInUse; a dead one's lock went with its process, so a crash never
//     blocks a restart.
//  3. Holding the lock, a socket file already at path is stale (its
//     daemon is dead): it is removed. Anything else there is refused,
//     never deleted.
//  4. It binds a socket under a temporary name beside path, sets its
//     mode, and renames it to path, so the socket is never reachable with
//     a wider mode than asked.
func listen(path string, mode os.FileMode) (*listener, error) {
	dir, err := socketDir(path)
	if err != nil {
		return nil, err
	}
	path = filepath.Join(dir, filepath.Base(path))
	lock, err := openLock(path + ".lock")
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another kvallocd holds %s.lock and serves %s", ErrInUse, path, path)
		}
		return nil, fmt.Errorf("kvallocd: locking %s.lock: %w", path, err)
	}
	fail := func(err error) (*listener, error) {
		lock.Close()
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return fail(fmt.Errorf("kvallocd: %s exists and is not a socket (%v); refusing to replace it", path, fi.Mode().Type()))
		}
		// A socket nobody listens on: a dead daemon's. If one answers,
		// it is a daemon that does not take the lock; leave it alone.
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return fail(fmt.Errorf("%w: a process is listening on %s", ErrInUse, path))
		}
		if err := os.Remove(path); err != nil {
			return fail(fmt.Errorf("kvallocd: removing stale socket %s: %w", path, err))
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Errorf("kvallocd: %w", err))
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+strconv.Itoa(os.Getpid()))
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return fail(fmt.Errorf("kvallocd: listen: %w", err))
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, mode); err != nil {
		ln.Close()
		os.Remove(tmp)
		return fail(fmt.Errorf("kvallocd: socket mode: %w", err))
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return fail(fmt.Errorf("kvallocd: socket: %w", err))
	}
	return &listener{ln: ln, path: path, lock: lock}, nil
}

// openLock opens (creating it) the lock file at path, refusing a symlink
// and anything that is not a regular file of this process's uid.
func openLock(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%w: the lock file %s is a symlink; refusing to follow it", ErrUnsafePath, path)
	}
	if err != nil {
		return nil, fmt.Errorf("kvallocd: lock file %s: %w", path, err)
	}
	lock := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		lock.Close()
		return nil, fmt.Errorf("kvallocd: lock file %s: %w", path, err)
	}
	if uid := uint32(os.Geteuid()); st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uid {
		lock.Close()
		return nil, fmt.Errorf("%w: the lock file %s is not a regular file of this daemon's uid %d (mode %#o, uid %d)", ErrUnsafePath, path, uid, st.Mode, st.Uid)
	}
	return lock, nil
}

// close stops listening, removes the socket and releases the lock. The
// lock file stays: removing it would let a second daemon lock a new file
// while a third still held the old one.
func (l *listener) close() error {
	err := l.ln.Close()
	if e := os.Remove(l.path); e != nil && !errors.Is(e, fs.ErrNotExist) && err == nil {
		err = e
	}
	l.lock.Close()
	return err
}
