//go:build linux && !race

package main

const raceOn = false
