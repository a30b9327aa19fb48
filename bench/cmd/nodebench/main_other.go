//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "nodebench: linux only (kvallocd's pool is a memfd)")
	os.Exit(2)
}
