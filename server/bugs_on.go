//go:build linux && kvalloc_daemon_bugs

package server

import "os"

// bug is the deliberate bug KVALLOC_DAEMON_BUG names (see bugs.go).
var bug, bugErr = parseBug(os.Getenv("KVALLOC_DAEMON_BUG"))

// checkBug refuses to start a daemon whose KVALLOC_DAEMON_BUG names no bug.
func checkBug() error { return bugErr }
