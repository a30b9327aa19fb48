//go:build linux

package client_test

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/wire"
)

// startVersion1Daemon serves a daemon of protocol version 1 at a fresh
// path: it answers a hello of any other version BAD_VERSION and closes,
// as such a daemon does, and serves the next connection as the fake
// does. It reports the versions of the hellos it got.
func startVersion1Daemon(t *testing.T) (string, <-chan uint32) {
	t.Helper()
	f := &fake{t: t, path: filepath.Join(t.TempDir(), "v1.sock"), got: make(chan wire.Type, 64), done: make(chan struct{}),
		hello: wire.Hello{Version: wire.Version, MaxKeys: wire.MaxKeys, MaxFrame: wire.MaxFrame, PoolSize: poolSize, Align: 4096}}
	versions := make(chan uint32, 4)
	l, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); <-f.done })
	go func() {
		defer close(f.done)
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			c := nc.(*net.UnixConn)
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			frame, err := wire.ReadFrame(c, nil)
			if err != nil {
				c.Close()
				return
			}
			v := uint32(frame[wire.HeaderSize+4]) // the hello's version, little-endian
			versions <- v
			if v != wire.Version {
				var e wire.Encoder
				b, _ := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypeHello.Answer(), ID: 1, Code: wire.CodeBadVersion, Message: "protocol version 2; this daemon speaks 1"})
				_, _ = c.Write(b)
				c.Close()
				continue
			}
			// Served from the hello on: serve reads it again, so hand it
			// the frame through a connection that replays it.
			go func() {
				defer c.Close()
				_ = f.serveAfterHello(c, frame, func(q *wire.Request) []byte {
					return answerOf(t, &wire.Answer{Type: q.Type.Answer(), ID: q.ID, Epoch: fakeEpoch})
				})
			}()
		}
	}()
	return f.path, versions
}

// TestDialFallsBackToVersion1: against a daemon of version 1, a Dial that
// asks for version 2 is refused BAD_VERSION and connects again with
// version 1; the default asks for version 1 at once.
func TestDialFallsBackToVersion1(t *testing.T) {
	t.Setenv("KVALLOC_PROTOCOL_VERSION", "") // the default, whatever the suite runs under
	path, versions := startVersion1Daemon(t)
	c, err := client.Dial(path, client.Options{Timeout: 10 * time.Second, Version: wire.Version2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Version() != wire.Version {
		t.Fatalf("speaking version %d to a version 1 daemon", c.Version())
	}
	if v1, v2 := <-versions, <-versions; v1 != wire.Version2 || v2 != wire.Version {
		t.Fatalf("hellos of versions %d then %d, want 2 then 1", v1, v2)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
	d, err := client.Dial(path, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if v := <-versions; d.Version() != wire.Version || v != wire.Version {
		t.Fatalf("the default spoke version %d after a hello of version %d, want 1 and 1", d.Version(), v)
	}
	if _, err := client.Dial(path, client.Options{Version: 3}); !errors.Is(err, wire.ErrInvalidArgument) {
		t.Fatalf("version 3: %v", err)
	}
}
