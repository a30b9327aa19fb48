//go:build linux && !kvalloc_daemon_bugs

package server

// bug is bugNone: this build has no deliberate bug (see bugs.go).
const bug = bugNone

// checkBug accepts any environment: the variable means nothing here.
func checkBug() error { return nil }
