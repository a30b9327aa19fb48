package rediscluster

import (
	"fmt"
	"os/exec"
)

// ErrMissing is wrapped by Start's error when redis-server or redis-cli
// is not installed.
var ErrMissing = fmt.Errorf("rediscluster: redis-server or redis-cli is missing; run `make redis` " +
	"(it installs Debian's redis-server and redis-tools)")

// binaries returns the paths of redis-server and redis-cli.
func binaries() (server, cli string, err error) {
	server, err = exec.LookPath("redis-server")
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrMissing, err)
	}
	cli, err = exec.LookPath("redis-cli")
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return server, cli, nil
}
