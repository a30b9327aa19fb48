//go:build linux

package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// DefaultTimeout is a call's deadline when Options.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Options configures Dial.
type Options struct {
	// Timeout is every call's deadline, Dial's included: the time from
	// sending the request to the end of its answer. 0 means 10 s. A call
	// that runs past it fails with an error wrapping
	// os.ErrDeadlineExceeded and ErrDisconnected, and the connection is
	// closed: the daemon then releases everything it held.
	Timeout time.Duration
	// DaemonUIDs are the uids the daemon may run as. Dial reads the
	// credentials of the process serving the socket (SO_PEERCRED) before
	// it sends anything, and refuses any other uid with an error wrapping
	// ErrUntrustedDaemon: another local user listening on the path gets
	// no hello and no key. Empty means root and this process's effective
	// uid.
	DaemonUIDs []uint32
	// Version is the protocol version to ask for: 0, the default, is
	// DefaultVersion; wire.Version is version 1; wire.Version2 asks for
	// version 2, key handles, and falls back to 1, by connecting again,
	// when the daemon answers a version 2 hello BAD_VERSION (a daemon of
	// version 1). The calls and their results are the same in every
	// version (wire/PROTOCOL.md, "Version 2: key handles"). With Version
	// 0, the environment variable KVALLOC_PROTOCOL_VERSION, when set to 1
	// or 2, is the version, so that a whole test suite, or a deployment,
	// can be run in either.
	Version uint32
}

// DefaultVersion is the protocol version Dial asks for by default:
// version 1. Through this client's calls, which take keys and leases,
// version 2 costs more CPU than it saves: the 5700-key cycle's CPU was
// 1.07-1.14 times version 1's in three interleaved runs (the client's
// book of handles and the daemon's resolution of them outweigh the keys
// of two frames in five not sent; server/DESIGN.md, "Per-connection key
// handles"). Version 2 is there for a client that asks for it.
const DefaultVersion = wire.Version

// versionEnv names the environment variable that sets Options.Version
// when it is 0.
const versionEnv = "KVALLOC_PROTOCOL_VERSION"

// envVersion reads versionEnv: 0 when unset; an error for anything but
// 1 or 2.
func envVersion() (uint32, error) {
	v, ok := os.LookupEnv(versionEnv)
	switch {
	case !ok || v == "":
		return 0, nil
	case v == "1":
		return wire.Version, nil
	case v == "2":
		return wire.Version2, nil
	}
	return 0, fmt.Errorf("%w: %s=%q: want 1 or 2", wire.ErrInvalidArgument, versionEnv, v)
}

// Errors. A refusal by the daemon is a *wire.Error: test it with
// errors.Is(err, wire.ErrWrongEpoch), wire.ErrInvalidArgument, ...
var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("kvalloc client: closed")
	// ErrDisconnected is wrapped by every error that ended the connection:
	// the daemon died or closed it, a deadline passed, a frame could not
	// be read. The daemon has released (or will release, as it notices)
	// every lock the connection held; Dial again to go on.
	ErrDisconnected = errors.New("kvalloc client: disconnected from the daemon")
	// ErrUntrustedDaemon is wrapped by Dial's error when the process
	// serving the socket runs as a uid not in Options.DaemonUIDs (by
	// default root and this process's uid): an impostor, or a daemon of
	// another user. Nothing was sent to it.
	ErrUntrustedDaemon = errors.New("kvalloc client: the socket is served by an untrusted uid")
)

// Lease is a lock's lease with the epoch of the daemon that handed it out.
// It is valid only on the connection (the Client) that got it.
type Lease struct {
	Epoch uint64
	ID    l1.Lease
}

// Block is a block of the pool with the epoch of the daemon that handed it
// out; Bytes maps it to memory.
type Block struct {
	Epoch uint64
	allocator.Block
}

// Status is one key's outcome: l1's statuses, and the daemon's NOT_OWNER,
// OVER_RELEASE and OVER_LIMIT (see package wire). OVER_LIMIT is a key
// past the cut of a call that would have taken this connection over one of
// the daemon's per-connection limits (read locks held, write bytes
// reserved): the keys before the cut were carried out, it and the keys
// after it were not sent on, and nothing changed for them (see
// OverLimitAt).
type Status = wire.Status

// Result is one key's outcome of a call that hands out memory or locks;
// Block and Lease are set when Status is wire.StatusOK.
type Result struct {
	Status Status
	Block  Block
	Lease  Lease
}

// Client is one connection to the daemon, with the pool mapped into this
// process. It is safe for concurrent use: calls are serialized, one
// request and its answer at a time. The locks a call takes belong to this
// connection: their leases are refused on any other (NOT_OWNER), and
// closing the Client, or this process's death, releases them all. For
// parallel calls open several Clients.
type Client struct {
	mu      sync.Mutex
	c       pathConn
	mem     []byte
	hello   wire.Hello
	epoch   uint64
	timeout time.Duration
	id      uint32
	broken  error // set once the connection is lost: every later call returns it
	closed  bool

	enc     wire.Encoder
	dec     wire.Decoder
	out, in []byte
	req     wire.Request
	ans     wire.Answer
	leases  []l1.Lease

	// version is the protocol version the hello agreed; on version 2,
	// book is the connection's ledger as the answers tell it, and handles
	// and sts the scratch of a call by handle (handles.go).
	version uint32
	book    *book
	handles []uint32
	sts     []wire.Status
}

// Dial connects to the daemon at path ("" means wire.DefaultSocketPath),
// says hello, receives the pool's memfd and maps it. A peer the daemon does
// not allow gets the daemon's message in an error wrapping
// wire.ErrNotAllowed; one past the daemon's caps on connections, or that
// came when it was out of descriptors, an error wrapping
// wire.ErrTooManyConnections. (A call the daemon answers BUSY, its frame
// buffers spent, returns an error wrapping wire.ErrBusy; nothing changed
// and the Client stays usable.)
func Dial(path string, opts Options) (*Client, error) {
	if path == "" {
		path = wire.DefaultSocketPath()
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout %v", wire.ErrInvalidArgument, opts.Timeout)
	}
	if opts.Version == 0 {
		v, err := envVersion()
		if err != nil {
			return nil, err
		}
		opts.Version = v
	}
	if opts.Version > wire.MaxVersion {
		return nil, fmt.Errorf("%w: protocol version %d; this client speaks %d to %d", wire.ErrInvalidArgument, opts.Version, wire.Version, wire.MaxVersion)
	}
	deadline := time.Now().Add(opts.Timeout)
	if opts.Version == 0 {
		opts.Version = DefaultVersion
	}
	if opts.Version == wire.Version {
		return dial(path, opts, deadline, wire.Version)
	}
	c, err := dial(path, opts, deadline, opts.Version)
	if errors.Is(err, wire.ErrBadVersion) {
		// A daemon of version 1: it closed the connection; connect again
		// and speak version 1.
		return dial(path, opts, deadline, wire.Version)
	}
	return c, err
}

// dial is Dial speaking version.
func dial(path string, opts Options, deadline time.Time, version uint32) (*Client, error) {
	d := net.Dialer{Deadline: deadline}
	nc, err := d.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", ErrDisconnected, path, err)
	}
	c := &Client{c: pathConn{nc.(*net.UnixConn), path}, timeout: opts.Timeout}
	if err := c.checkDaemon(opts.DaemonUIDs); err != nil {
		c.c.Close()
		return nil, err
	}
	// Room for a 5700-key frame (400 KB) in one write.
	_ = c.c.SetWriteBuffer(4 << 20)
	_ = c.c.SetReadBuffer(4 << 20)
	_ = c.c.SetDeadline(deadline)
	fd, err := c.hello1(version)
	if err != nil {
		c.c.Close()
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, int(c.hello.PoolSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		c.c.Close()
		return nil, fmt.Errorf("kvalloc client: mapping the pool (%d bytes): %w", c.hello.PoolSize, err)
	}
	c.mem = mem
	return c, nil
}

// hello1 sends the hello of version and reads its answer and the memfd.
func (c *Client) hello1(version uint32) (int, error) {
	c.id++
	c.dec.Version = version
	out, err := c.enc.AppendRequest(c.out[:0], &wire.Request{Type: wire.TypeHello, ID: c.id, Version: version})
	if err != nil {
		return -1, err
	}
	// A refused peer's answer is already on its way: read it even when
	// the daemon closed before the hello could be written.
	_, werr := c.c.Write(out)
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.c.ReadMsgUnix(buf, oob)
	if err != nil {
		if werr != nil {
			err = werr
		}
		return -1, c.disconnected("hello: %w", err)
	}
	fd := -1
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if fds, err := unix.ParseUnixRights(&m); err == nil {
				for _, f := range fds {
					if fd < 0 {
						fd = f
					} else {
						unix.Close(f)
					}
				}
			}
		}
	}
	fail := func(err error) (int, error) {
		if fd >= 0 {
			unix.Close(fd)
		}
		return -1, err
	}
	frame, err := c.completeFrame(buf[:n])
	if err != nil {
		return fail(err)
	}
	var a wire.Answer
	if err := c.dec.DecodeAnswer(frame, &a); err != nil {
		return fail(c.disconnected("hello answer: %w", err))
	}
	if err := a.Err(); err != nil {
		return fail(fmt.Errorf("kvalloc client: the daemon refused the connection: %w", err))
	}
	switch {
	case a.Type != wire.TypeHello.Answer():
		return fail(c.disconnected("a %v answered the hello", a.Type))
	case fd < 0:
		return fail(c.disconnected("the hello answer carried no memfd"))
	case a.Hello.PoolSize <= 0 || a.Hello.Align <= 0 || a.Epoch == 0:
		return fail(c.disconnected("hello answer with pool size %d, alignment %d, epoch %d", a.Hello.PoolSize, a.Hello.Align, a.Epoch))
	case a.Hello.MaxFrame < wire.HeaderSize:
		return fail(c.disconnected("hello answer with MaxFrame %d, under a header's %d bytes", a.Hello.MaxFrame, wire.HeaderSize))
	case a.Hello.Version < wire.Version || a.Hello.Version > version:
		return fail(c.disconnected("the daemon answered a version %d hello with version %d", version, a.Hello.Version))
	}
	// The connection speaks the answer's version: the hello's, or a lower
	// one a daemon chose (the protocol's daemons answer a version they do
	// not speak BAD_VERSION, which Dial takes as its cue to fall back).
	c.hello, c.epoch, c.version = a.Hello, a.Epoch, a.Hello.Version
	c.dec.Version = c.version
	if c.version >= wire.Version2 {
		c.book = &book{}
	}
	return fd, nil
}

// completeFrame reads the rest of a frame of which got holds the start.
func (c *Client) completeFrame(got []byte) ([]byte, error) {
	for len(got) < wire.HeaderSize {
		more := make([]byte, wire.HeaderSize-len(got))
		n, err := c.c.Read(more)
		if err != nil {
			return nil, c.disconnected("reading a frame: %w", err)
		}
		got = append(got, more[:n]...)
	}
	h, err := wire.ParseHeader(got)
	if err != nil {
		return nil, c.disconnected("%w", err)
	}
	if int(h.Size) < len(got) {
		return nil, c.disconnected("the daemon sent %d bytes before a %d-byte answer was read", len(got), h.Size)
	}
	frame := make([]byte, h.Size)
	copy(frame, got)
	if _, err := readFull(c.c, frame[len(got):]); err != nil {
		return nil, c.disconnected("reading a frame: %w", err)
	}
	return frame, nil
}

func readFull(c pathConn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// Epoch is the pool's epoch: the daemon's, at Dial.
func (c *Client) Epoch() uint64 { return c.epoch }

// Version is the protocol version the connection speaks: wire.Version2
// (key handles) unless the daemon speaks only wire.Version or
// Options.Version asked for it.
func (c *Client) Version() uint32 { return c.version }

// PoolSize is the pool's size in bytes.
func (c *Client) PoolSize() int64 { return c.hello.PoolSize }

// Align is the block alignment.
func (c *Client) Align() int64 { return c.hello.Align }

// MaxFrame is the largest request frame the daemon accepts, from its
// hello: a call whose frame would be larger is refused before it is sent.
func (c *Client) MaxFrame() int { return int(c.hello.MaxFrame) }

// OverLimitAt returns the index of the first key of a call's results that
// the daemon cut for its per-connection limits (wire.StatusOverLimit), or
// -1 when it cut none. The keys before it were carried out as without the
// limit; that key and every later one were not (for ReserveReadPrefix the
// ones after it are SKIPPED). Give back what the connection holds
// (FinishRead, FinishWrite, AbortWrite) and send the rest again.
func OverLimitAt(res []Result) int {
	for i := range res {
		if res[i].Status == wire.StatusOverLimit {
			return i
		}
	}
	return -1
}

// Bytes returns the block's memory in this process's mapping of the pool:
// write an object between ReserveWrite and FinishWrite, read it while
// holding a read lock. A block of another epoch (an earlier daemon's) or
// outside the pool is an error wrapping wire.ErrWrongEpoch or
// wire.ErrInvalidArgument. The slice is valid until Close; Bytes must not
// be called concurrently with Close.
func (c *Client) Bytes(b Block) ([]byte, error) {
	if b.Epoch != c.epoch {
		return nil, fmt.Errorf("%w: block of epoch %#x on a connection of epoch %#x", wire.ErrWrongEpoch, b.Epoch, c.epoch)
	}
	mem := c.mem
	if b.Offset < 0 || b.Size < 0 || b.Offset > int64(len(mem))-b.Size {
		return nil, fmt.Errorf("%w: block [%d, +%d) outside the pool of %d bytes", wire.ErrInvalidArgument, b.Offset, b.Size, len(mem))
	}
	return mem[b.Offset : b.Offset+b.Size : b.Offset+b.Size], nil
}

// Close closes the connection, which releases every lock it holds in the
// daemon, and unmaps the pool: slices from Bytes are invalid after. It is
// idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed, c.broken = true, ErrClosed
	err := c.c.Close()
	if c.mem != nil {
		if e := unix.Munmap(c.mem); err == nil {
			err = e
		}
		c.mem = nil
	}
	return err
}

// call sends c.req and reads its answer into c.ans, within the deadline.
// It holds c.mu. What the daemon would refuse by its hello's limits (more
// keys than its MaxKeys, a frame over its MaxFrame) is refused before
// anything is sent, as the encoder refuses what no frame can carry: an
// *wire.Error with CodeInvalidArgument, and the client goes on. Once the
// first byte is sent, any failure (of the transport, a malformed answer,
// one whose results or statuses are not one per key, or a code that
// closes the connection) breaks the client: the connection's next answer
// could be this request's.
func (c *Client) call() error {
	if c.broken != nil {
		return c.broken
	}
	q := &c.req
	nkeys := len(q.Keys)
	if q.ByHandles() {
		nkeys = len(q.Handles)
	}
	if n := nkeys; n > int(c.hello.MaxKeys) {
		return &wire.Error{Code: wire.CodeInvalidArgument, Msg: fmt.Sprintf("%d keys exceed the daemon's limit %d", n, c.hello.MaxKeys)}
	}
	q.ID, q.Epoch = c.id+1, c.epoch
	out, err := c.enc.AppendRequest(c.out[:0], q)
	if err != nil {
		return err
	}
	c.out = out
	if len(out) > int(c.hello.MaxFrame) {
		return &wire.Error{Code: wire.CodeInvalidArgument, Msg: fmt.Sprintf("%v of %d keys is a frame of %d bytes, over the daemon's limit %d", q.Type, nkeys, len(out), c.hello.MaxFrame)}
	}
	c.id++
	_ = c.c.SetDeadline(time.Now().Add(c.timeout))
	if _, err := c.c.Write(out); err != nil {
		return c.lost("sending %v: %w", q.Type, err)
	}
	in, err := wire.ReadFrame(c.c, c.in)
	if err != nil {
		return c.lost("reading the %v answer: %w", q.Type, err)
	}
	c.in = in
	a := &c.ans
	if err := c.dec.DecodeAnswer(in, a); err != nil {
		return c.lost("the %v answer: %w", q.Type, err)
	}
	if a.ID != q.ID || (a.Type != q.Type.Answer() && a.Type != wire.TypeError) {
		return c.lost("a %v with id %d answered the %v with id %d", a.Type, a.ID, q.Type, q.ID)
	}
	if err := a.Err(); err != nil {
		if a.Code.Closes() {
			// The daemon closes the connection after this answer.
			c.broken = c.disconnected("%w", err)
			c.c.Close()
			return c.broken
		}
		return err
	}
	if q.Type.Keyed() && q.Type != wire.TypeTouch {
		got, what := len(a.Statuses), "statuses"
		switch {
		case q.Type.HasResults():
			got, what = len(a.Results), "results"
		case q.Type == wire.TypeLookup:
			got, what = int(a.Lookup.N), "keys counted"
		}
		if got != nkeys {
			return c.lost("a %v answer with %d %s for %d keys", q.Type, got, what, nkeys)
		}
	}
	return nil
}

// lost breaks the client after a transport failure.
func (c *Client) lost(format string, args ...any) error {
	c.broken = c.disconnected(format, args...)
	c.c.Close()
	return c.broken
}

// disconnected is an error wrapping ErrDisconnected that names the
// socket's path.
func (c *Client) disconnected(format string, args ...any) error {
	return fmt.Errorf("%w: %s: %w", ErrDisconnected, c.c.path, fmt.Errorf(format, args...))
}

// keyed prepares c.req for a keyed request.
func (c *Client) keyed(t wire.Type, keys []l1.ObjectKey) *wire.Request {
	c.req = wire.Request{Type: t, Keys: keys}
	return &c.req
}

// ids converts leases for the wire, refusing any of another epoch.
func (c *Client) ids(leases []Lease) ([]l1.Lease, error) {
	out := c.leases[:0]
	for i, l := range leases {
		if l.Epoch != c.epoch {
			return nil, fmt.Errorf("%w: lease %d is of epoch %#x, this connection's is %#x", wire.ErrWrongEpoch, i, l.Epoch, c.epoch)
		}
		out = append(out, l.ID)
	}
	c.leases = out
	return out, nil
}

// results converts the answer's results.
func (c *Client) results() []Result {
	out := make([]Result, len(c.ans.Results))
	for i, r := range c.ans.Results {
		out[i].Status = r.Status
		if r.Status == wire.StatusOK {
			out[i].Block = Block{Epoch: c.epoch, Block: r.Block}
			out[i].Lease = Lease{Epoch: c.epoch, ID: r.Lease}
		}
	}
	return out
}

func (c *Client) statuses() []Status {
	return append([]Status(nil), c.ans.Statuses...)
}
