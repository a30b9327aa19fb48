//go:build linux && race

package server_test

// raceEnabled: the race detector slows the daemon 5 to 10 times.
const raceEnabled = true
