//go:build linux

package main

import (
	"path/filepath"
	"testing"

	"github.com/kvalloc/kvalloc/server"
)

// TestExample runs the quickstart against a daemon on its defaults (a
// smaller pool), in process.
func TestExample(t *testing.T) {
	cfg := server.Defaults()
	cfg.SocketPath = filepath.Join(t.TempDir(), "kvallocd.sock")
	cfg.PoolSize = 64 << 20
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	defer s.Close()
	if err := run(cfg.SocketPath); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Objects != 0 || st.WriteReservations != 3 {
		t.Fatalf("%+v", st)
	}
}
