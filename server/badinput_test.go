//go:build linux

package server_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// rawConn is a connection that speaks frames by hand.
type rawConn struct {
	t     testing.TB
	c     *net.UnixConn
	epoch uint64
	enc   wire.Encoder
	dec   wire.Decoder
	hello wire.Hello
}

// raw connects; with hello, it also says hello (and closes the memfd it
// gets).
func raw(t testing.TB, s *server.Server, hello bool) *rawConn {
	t.Helper()
	if hello {
		return rawVersion(t, s, wire.Version)
	}
	return rawVersion(t, s, 0)
}

// rawVersion connects and, unless version is 0, says hello with that
// version and decodes what follows by its rules; it returns the hello
// answer's body in r.hello.
func rawVersion(t testing.TB, s *server.Server, version uint32) *rawConn {
	t.Helper()
	hello := version != 0
	nc, err := net.Dial("unix", s.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	r := &rawConn{t: t, c: nc.(*net.UnixConn)}
	t.Cleanup(func() { r.c.Close() })
	if hello {
		r.dec.Version = version
		r.send(r.frame(wire.Request{Type: wire.TypeHello, ID: 1, Version: version}))
		buf := make([]byte, 4096)
		oob := make([]byte, unix.CmsgSpace(4))
		_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, oobn, _, _, err := r.c.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		fds, err := unix.ParseUnixRights(&msgs[0])
		if err != nil || len(fds) != 1 {
			t.Fatalf("hello answer: %v, fds %v", err, fds)
		}
		unix.Close(fds[0])
		var a wire.Answer
		if err := r.dec.DecodeAnswer(buf[:n], &a); err != nil || a.Code != wire.CodeOK {
			t.Fatalf("hello: %v %v", err, a.Err())
		}
		r.epoch = a.Epoch
		r.hello = a.Hello
	}
	return r
}

func (r *rawConn) frame(q wire.Request) []byte {
	b, err := r.enc.AppendRequest(nil, &q)
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

func (r *rawConn) send(b []byte) {
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// answer reads one answer.
func (r *rawConn) answer() wire.Answer {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := wire.ReadFrame(r.c, nil)
	if err != nil {
		r.t.Fatalf("reading an answer: %v", err)
	}
	var a wire.Answer
	if err := r.dec.DecodeAnswer(f, &a); err != nil {
		r.t.Fatalf("decoding an answer: %v", err)
	}
	return a
}

// closed checks the daemon closed the connection.
func (r *rawConn) closed() {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	// EOF, or a reset when the daemon closed with the rest of a bad
	// frame unread.
	if n, err := r.c.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, unix.ECONNRESET) {
		r.t.Fatalf("the daemon kept the connection open: read %d, %v", n, err)
	}
}

// TestBadInput: every kind of bad frame gets its code and a message, the
// connection is closed, its locks are released, and a client on another
// connection goes on as if nothing happened.
func TestBadInput(t *testing.T) {
	s := start(t, server.Config{FrameTimeout: 300 * time.Millisecond})
	bystander := dial(t, s)
	bk := keys("bystander", 3)
	bres, err := bystander.ReserveWrite(bk, nil, 4096, l1.ModeAll)
	if err != nil {
		t.Fatal(err)
	}
	set32 := func(b []byte, off int, v uint32) []byte { binary.LittleEndian.PutUint32(b[off:], v); return b }
	var e wire.Encoder
	ping := func() []byte { b, _ := e.AppendRequest(nil, &wire.Request{Type: wire.TypePing, ID: 9}); return b }
	for _, c := range []struct {
		name  string
		hello bool // say hello first, and reserve something the bad frame must release
		bytes func(r *rawConn) []byte
		code  wire.Code
		typ   wire.Type
	}{
		{"garbage", true, func(*rawConn) []byte { return []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n") }, wire.CodeTooLarge, wire.TypeError},
		{"oversized", true, func(*rawConn) []byte { return set32(ping(), 0, wire.MaxFrame+1) }, wire.CodeTooLarge, wire.TypePing.Answer()},
		{"undersized", true, func(*rawConn) []byte { return set32(ping(), 0, 3) }, wire.CodeTooLarge, wire.TypePing.Answer()},
		{"unknown type", true, func(*rawConn) []byte { b := ping(); b[4] = 0x7f; return b }, wire.CodeUnknownType, wire.TypeError},
		{"malformed body", true, func(r *rawConn) []byte {
			b := r.frame(wire.Request{Type: wire.TypeTouch, ID: 3, Epoch: r.epoch, Keys: keys("k", 2)})
			return set32(b, wire.HeaderSize+16, 7) // 7 keys announced, 2 sent
		}, wire.CodeBadFrame, wire.TypeTouch.Answer()},
		{"answer as request", true, func(*rawConn) []byte { b := ping(); b[5] |= 0x80; return b }, wire.CodeBadFrame, wire.TypeError},
		{"no hello", false, func(*rawConn) []byte { return ping() }, wire.CodeNoHello, wire.TypePing.Answer()},
		{"second hello", true, func(r *rawConn) []byte {
			return r.frame(wire.Request{Type: wire.TypeHello, ID: 2, Version: wire.Version})
		}, wire.CodeNoHello, wire.TypeHello.Answer()},
		{"wrong version", false, func(r *rawConn) []byte {
			b := r.frame(wire.Request{Type: wire.TypeHello, ID: 1, Version: wire.Version})
			return set32(b, wire.HeaderSize+4, wire.MaxVersion+1)
		}, wire.CodeBadVersion, wire.TypeHello.Answer()},
		{"half a frame then a stall", true, func(r *rawConn) []byte {
			b := r.frame(wire.Request{Type: wire.TypeTouch, ID: 3, Epoch: r.epoch, Keys: keys("k", 20)})
			return b[:len(b)/2]
		}, wire.CodeTimeout, wire.TypeTouch.Answer()},
		{"half a header then a stall", true, func(*rawConn) []byte { return ping()[:7] }, wire.CodeTimeout, wire.TypeError},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := raw(t, s, c.hello)
			closedBefore := s.Stats().ConnsClosed
			if c.hello {
				r.send(r.frame(wire.Request{Type: wire.TypeReserveWrite, ID: 2, Epoch: r.epoch, Size: 1 << 20, Keys: keys("victim-"+c.name, 4)}))
				if a := r.answer(); a.Code != wire.CodeOK || len(a.Results) != 4 || a.Results[3].Status != wire.StatusOK {
					t.Fatalf("reserve: %+v", a)
				}
				if st := s.Stats(); st.WriteLocked != 3+4 {
					t.Fatalf("%d write-locked", st.WriteLocked)
				}
			}
			r.send(c.bytes(r))
			a := r.answer()
			if a.Code != c.code || a.Type != c.typ || a.Message == "" {
				t.Fatalf("answer %v %v %q, want %v %v and a message", a.Type, a.Code, a.Message, c.typ, c.code)
			}
			t.Logf("%v: %s", a.Code, a.Message)
			r.closed()
			waitClosed(t, s, closedBefore+1)
			check(t, s)
			if st := s.Stats(); st.WriteLocked != 3 {
				t.Fatalf("%d write-locked after the bad frame; the bystander's 3 only", st.WriteLocked)
			}
			if err := bystander.Ping(); err != nil {
				t.Fatalf("bystander: %v", err)
			}
		})
	}
	allOK(t, "the bystander finishes")(bystander.FinishWrite(bk, leasesOf(bres)))
	check(t, s)
}

// TestTruncatedFrame: a peer that closes mid-frame is released.
func TestTruncatedFrame(t *testing.T) {
	s := start(t, server.Config{})
	r := raw(t, s, true)
	r.send(r.frame(wire.Request{Type: wire.TypeReserveWrite, ID: 2, Epoch: r.epoch, Size: 4096, Keys: keys("t", 2)}))
	r.answer()
	b := r.frame(wire.Request{Type: wire.TypeTouch, ID: 3, Epoch: r.epoch, Keys: keys("t", 2)})
	r.send(b[:len(b)-3])
	before := s.Stats().ConnsClosed
	r.c.Close()
	waitClosed(t, s, before+1)
	check(t, s)
	if st := s.Stats(); st.WriteLocked != 0 || st.Objects != 0 {
		t.Fatalf("%+v", st)
	}
	if recs := s.Closes(); recs[len(recs)-1].Why != "truncated frame: the peer closed mid-frame" {
		t.Fatalf("why: %q", recs[len(recs)-1].Why)
	}
}

// TestWrongEpoch: a request with another epoch (leases of an earlier
// daemon) is refused, changes nothing, and the connection goes on; the
// client refuses leases and blocks of another epoch itself.
func TestWrongEpoch(t *testing.T) {
	s := start(t, server.Config{})
	r := raw(t, s, true)
	r.send(r.frame(wire.Request{Type: wire.TypeReserveWrite, ID: 2, Epoch: r.epoch, Size: 4096, Keys: keys("e", 1)}))
	res := r.answer().Results
	r.send(r.frame(wire.Request{Type: wire.TypeFinishWrite, ID: 3, Epoch: r.epoch + 1, Keys: keys("e", 1), Leases: []l1.Lease{res[0].Lease}}))
	if a := r.answer(); a.Code != wire.CodeWrongEpoch || !errors.Is(a.Err(), wire.ErrWrongEpoch) {
		t.Fatalf("%+v", a)
	}
	if st, _ := s.Manager().State(keys("e", 1)[0]); !st.WriteLocked {
		t.Fatal("a refused finish changed the object")
	}
	r.send(r.frame(wire.Request{Type: wire.TypeFinishWrite, ID: 4, Epoch: r.epoch, Keys: keys("e", 1), Leases: []l1.Lease{res[0].Lease}}))
	if a := r.answer(); a.Code != wire.CodeOK || a.Statuses[0] != wire.StatusOK {
		t.Fatalf("%+v", a)
	}
	c := dial(t, s)
	old := client.Lease{Epoch: c.Epoch() ^ 1, ID: 7}
	if _, err := c.FinishWrite(keys("e", 1), []client.Lease{old}); !errors.Is(err, wire.ErrWrongEpoch) {
		t.Fatalf("old lease: %v", err)
	}
	if _, err := c.Bytes(client.Block{Epoch: c.Epoch() ^ 1}); !errors.Is(err, wire.ErrWrongEpoch) {
		t.Fatalf("old block: %v", err)
	}
	if err := c.Ping(); err != nil {
		t.Fatal(err)
	}
}
