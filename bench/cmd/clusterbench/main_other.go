//go:build !linux

// Command clusterbench is the node-scale replay of kvalloc's L2 tier; it
// runs on linux only, as bench/node does.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "clusterbench: linux only")
	os.Exit(2)
}
