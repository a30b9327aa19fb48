//go:build !linux

package main

import (
	"fmt"
	"runtime"
)

// openCUDA off Linux: the regions the check pins are Linux only.
func openCUDA() (device, error) {
	return nil, fmt.Errorf("%w: the check needs Linux, not %s", errNoGPU, runtime.GOOS)
}
