//go:build linux && !race

package server_test

const raceEnabled = false
