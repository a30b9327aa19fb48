//go:build linux

package server

import "github.com/kvalloc/kvalloc/l1"

// The daemon's use of two l1 features that are being added to l1: the
// quarantine of a lapsed write lock whose owner is alive, and the bytes it
// holds. Until they land these are the identity and 0, and a lapsed write
// is reclaimed as l1 does today (its block may go to another writer while
// the stuck owner still writes into it); the daemon's TTLs are its
// backstop only, and the connection's end is what releases a lock.

// withQuarantine returns cfg with l1's quarantine of lapsed writes on.
func withQuarantine(cfg l1.Config) l1.Config { return cfg }

// quarantined returns the bytes l1 holds in quarantine.
func quarantined(l1.Stats) int64 { return 0 }
