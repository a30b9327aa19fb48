//go:build linux

package client_test

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/wire"
)

// fakeEpoch is the fake daemon's epoch.
const fakeEpoch = 0x5eed

// fake is a daemon of one connection, served by a script from a
// goroutine: it answers the hello as kvallocd does (with a memfd of
// poolSize bytes) and hands every later request to answer, which returns
// the bytes to send back (nil: send nothing). It records each request's
// type.
type fake struct {
	t     *testing.T
	path  string
	hello wire.Hello
	got   chan wire.Type
	done  chan struct{}
}

const poolSize = 1 << 20

// startFake serves one connection at a fresh path with hello's limits (0
// means wire's) and answer.
func startFake(t *testing.T, hello wire.Hello, answer func(q *wire.Request) []byte) *fake {
	t.Helper()
	f := &fake{t: t, path: filepath.Join(t.TempDir(), "fake.sock"), got: make(chan wire.Type, 64), done: make(chan struct{})}
	if hello.MaxKeys == 0 {
		hello.MaxKeys = wire.MaxKeys
	}
	if hello.MaxFrame == 0 {
		hello.MaxFrame = wire.MaxFrame
	}
	hello.Version, hello.PoolSize, hello.Align = wire.Version, poolSize, 4096
	f.hello = hello
	l, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); <-f.done })
	go func() {
		defer close(f.done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		c := nc.(*net.UnixConn)
		defer c.Close()
		if err := f.serve(c, answer); err != nil {
			t.Logf("fake: %v", err)
		}
	}()
	return f
}

func (f *fake) serve(c *net.UnixConn, answer func(q *wire.Request) []byte) error {
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	frame, err := wire.ReadFrame(c, nil)
	if err != nil {
		return err
	}
	return f.serveAfterHello(c, frame, answer)
}

// serveAfterHello is serve once the hello's frame has been read.
func (f *fake) serveAfterHello(c *net.UnixConn, frame []byte, answer func(q *wire.Request) []byte) error {
	var e wire.Encoder
	var d wire.Decoder
	var q wire.Request
	if err := d.DecodeRequest(frame, &q); err != nil {
		return err
	}
	b, err := e.AppendAnswer(nil, &wire.Answer{Type: wire.TypeHello.Answer(), ID: q.ID, Epoch: fakeEpoch, Hello: f.hello})
	if err != nil {
		return err
	}
	fd, err := unix.MemfdCreate("fake-pool", unix.MFD_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, poolSize); err != nil {
		return err
	}
	if _, _, err := c.WriteMsgUnix(b, unix.UnixRights(fd), nil); err != nil {
		return err
	}
	for {
		frame, err := wire.ReadFrame(c, frame)
		if err != nil {
			return nil // the client closed
		}
		if err := d.DecodeRequest(frame, &q); err != nil {
			return err
		}
		f.got <- q.Type
		if out := answer(&q); out != nil {
			if _, err := c.Write(out); err != nil {
				return err
			}
		}
	}
}

// dialFake connects a client to f.
func dialFake(t *testing.T, f *fake) *client.Client {
	t.Helper()
	c, err := client.Dial(f.path, client.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sent returns the types of the requests f has received so far.
func (f *fake) sent() []wire.Type {
	var out []wire.Type
	for {
		select {
		case ty := <-f.got:
			out = append(out, ty)
		default:
			return out
		}
	}
}

// answerOf encodes a, failing the test on an error.
func answerOf(t *testing.T, a *wire.Answer) []byte {
	var e wire.Encoder
	b, err := e.AppendAnswer(nil, a)
	if err != nil {
		t.Error(err)
	}
	return b
}
