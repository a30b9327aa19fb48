package rediscluster

import (
	"context"
	"testing"
)

// New starts a cluster for the test (Start) and closes it when the test
// ends; it fails the test, naming `make redis`, when Redis is missing.
func New(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// NewServer starts one plain redis-server for the test (StartServer) and
// closes it when the test ends; it fails the test when Redis is missing.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := StartServer(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}
