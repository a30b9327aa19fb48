//go:build linux && race

package main

// raceOn: the race detector's shadow memory is in RssAnon and is not given
// back, so TestIdleConnectionsRSS bounds the Go heap alone.
const raceOn = true
