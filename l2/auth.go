package l2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// ReadSecretFile reads a secret (a MAC secret, a Redis password) from
// path, as sshd reads a private key: it must be a regular file owned by
// the process's effective uid or by root, with no permission for group
// or others (mode 0600 or 0400), not a symlink. One trailing newline
// ("\n" or "\r\n") is dropped; an empty secret is refused.
func ReadSecretFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("l2: secret file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("l2: secret file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("l2: secret file %s is not a regular file (%v)", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("l2: secret file %s has mode %04o: group and others must have no access (chmod 600)", path, perm)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if euid := os.Geteuid(); int(st.Uid) != euid && st.Uid != 0 {
			return nil, fmt.Errorf("l2: secret file %s is owned by uid %d, neither this process's (%d) nor root", path, st.Uid, euid)
		}
	}
	if fi.Size() > 1<<16 {
		return nil, fmt.Errorf("l2: secret file %s is %d bytes: a secret is at most 64 KiB", path, fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<16+1))
	if err != nil {
		return nil, fmt.Errorf("l2: secret file: %w", err)
	}
	if len(b) > 1<<16 {
		return nil, fmt.Errorf("l2: secret file %s grew past 64 KiB", path)
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("l2: secret file %s is empty", path)
	}
	return b, nil
}

// ReadSecret is ReadSecretFile made into a MAC Secret (at least
// MinSecret bytes).
func ReadSecret(path string) (*Secret, error) {
	b, err := ReadSecretFile(path)
	if err != nil {
		return nil, err
	}
	s, err := NewSecret(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ErrAuth is wrapped by NewRedis's error when Redis refused the
// credentials it was given (NOAUTH: a password is required; WRONGPASS:
// user or password wrong; NOPERM: the ACL user may not run a command the
// tier needs).
var ErrAuth = errors.New("l2: Redis refused the credentials")

// isAuthError reports whether err is Redis refusing the connection's
// credentials or its ACL user's permissions.
func isAuthError(err error) bool {
	if err == nil {
		return false
	}
	m := err.Error()
	return strings.HasPrefix(m, "NOAUTH") || strings.HasPrefix(m, "WRONGPASS") || strings.HasPrefix(m, "NOPERM") ||
		strings.Contains(m, "without any password configured")
}
