//go:build linux

package server

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// sd_notify, written out: systemd's notification protocol is one datagram
// of newline-separated KEY=VALUE assignments to the AF_UNIX socket named by
// $NOTIFY_SOCKET (a path, or an abstract name written with a leading '@'),
// with descriptors for the fd store attached as SCM_RIGHTS. systemd
// checks the sender's credentials itself (the unit's main process, or
// NotifyAccess=).

// notifier sends to the notification socket; nil when there is none.
type notifier struct {
	addr string
}

// newNotifier reads $NOTIFY_SOCKET; nil when unset or of another family
// (systemd also offers vsock addresses, for virtual machines).
func newNotifier() *notifier {
	p := os.Getenv("NOTIFY_SOCKET")
	if p == "" || !(strings.HasPrefix(p, "/") || strings.HasPrefix(p, "@")) {
		return nil
	}
	return &notifier{addr: p}
}

// send sends state (KEY=VALUE lines) with fds attached, in one datagram
// from an unbound socket of its own (an abstract address, '@', is
// x/sys/unix's spelling too).
func (n *notifier) send(state string, fds ...int) error {
	if n == nil {
		return nil
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("kvallocd: notify socket: %w", err)
	}
	defer unix.Close(fd)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(fd, []byte(state), oob, &unix.SockaddrUnix{Name: n.addr}, 0); err != nil {
		return fmt.Errorf("kvallocd: notifying systemd at %s (%q): %w", n.addr, firstLine(state), err)
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
