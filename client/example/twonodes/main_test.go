//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// freePorts finds n consecutive loopback ports that nothing listens on.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		base := 20000 + rand.IntN(20000)
		free := true
		for i := range n {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				free = false
				break
			}
			l.Close()
			// A cluster's bus port is the port plus 10000.
			if l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i+10000)); err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// TestTwoNodesQuickstart runs the README's two-node quickstart as a user
// would, two-nodes.sh from the repository's root: a real cluster, two
// real daemons, and this program between them, 16 chunks of 256 KiB and
// then one of 8 MiB. It fails, with the tool's name, where redis-server
// or redis-cli is missing.
func TestTwoNodesQuickstart(t *testing.T) {
	for _, tool := range []string{"bash", "redis-server", "redis-cli"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quickstart needs %s: make redis installs redis-server and redis-cli", tool)
		}
	}
	for _, args := range [][]string{{}, {"-chunks", "1", "-size", "8388608"}} {
		cmd := exec.Command("bash", append([]string{"client/example/twonodes/two-nodes.sh"}, args...)...)
		cmd.Dir = "../../.."
		cmd.Env = append(cmd.Environ(), fmt.Sprintf("PORT=%d", freePorts(t, 6)))
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Fatalf("two-nodes.sh %v: %v", args, err)
		}
		n := "16"
		if len(args) > 0 {
			n = "1"
		}
		if !strings.Contains(string(out), "node B: read all "+n+" chunks, every byte as node A wrote it") {
			t.Fatalf("two-nodes.sh %v: node B did not read every chunk", args)
		}
	}
}
