// Command rediscluster starts a real Redis Cluster for the vLLM connector's
// end-to-end tests (python/tests/vllm/e2e.py), prints its redis:// URL on
// one line, and tears it down when its standard input closes or it is
// signalled. It is internal/rediscluster behind a process boundary, for a
// test written in Python.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
)

func main() {
	masters := flag.Int("masters", 3, "masters")
	replicas := flag.Int("replicas", -1, "replicas per master (-1: none)")
	flag.Parse()
	c, err := rediscluster.Start(context.Background(), rediscluster.Options{
		Masters: *masters, Replicas: *replicas})
	if err != nil {
		fmt.Fprintln(os.Stderr, "rediscluster:", err)
		os.Exit(1)
	}
	defer c.Close()
	fmt.Println(c.URL())
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-sig:
	}
}
