//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
	"github.com/kvalloc/kvalloc/wire"
)

// growProxy sits between a daemon and a plain redis-server. Before it
// forwards a command that reads a value's payload (a GET, or a GETRANGE
// past the first 4 KiB, which a lookup's header read never asks for) it
// grows that value in Redis to grow bytes (SETRANGE), once per value:
// the value changes between the lookup's header read and the prefetch's
// get, every time, not by luck of timing.
type growProxy struct {
	ln    net.Listener
	redis string
	grow  int64
	mu    sync.Mutex
	grown map[string]bool
}

func newGrowProxy(t *testing.T, redisAddr string, grow int64) *growProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &growProxy{ln: ln, redis: redisAddr, grow: grow, grown: map[string]bool{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *growProxy) addr() string { return p.ln.Addr().String() }

func (p *growProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.redis)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(c, up) // answers, as they come
	r := bufio.NewReader(c)
	for {
		cmd, err := readRESP(r)
		if err != nil {
			return
		}
		if len(cmd) >= 2 && p.readsPayload(cmd) {
			p.growOnce(cmd[1])
		}
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := io.WriteString(up, b.String()); err != nil {
			return
		}
	}
}

func (p *growProxy) readsPayload(cmd []string) bool {
	switch strings.ToUpper(cmd[0]) {
	case "GET":
		return true
	case "GETRANGE":
		end, err := strconv.ParseInt(cmd[len(cmd)-1], 10, 64)
		return err == nil && end >= 4096
	}
	return false
}

// growOnce appends to name's value in Redis, on a connection of its own,
// until the value is p.grow bytes long.
func (p *growProxy) growOnce(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.grown[name] {
		return
	}
	p.grown[name] = true
	c, err := net.Dial("tcp", p.redis)
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(c, "*4\r\n$8\r\nSETRANGE\r\n$%d\r\n%s\r\n$%d\r\n%d\r\n$1\r\nx\r\n",
		len(name), name, len(strconv.FormatInt(p.grow-1, 10)), p.grow-1)
	bufio.NewReader(c).ReadString('\n')
}

// readRESP reads one command: an array of bulk strings.
func readRESP(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 || n > 1<<20 {
		return nil, fmt.Errorf("array of %q", line)
	}
	cmd := make([]string, n)
	for i := range cmd {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(hdr, "$")))
		if err != nil || l < 0 || l > 64<<20 {
			return nil, fmt.Errorf("bulk of %q", hdr)
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		cmd[i] = string(b[:l])
	}
	return cmd, nil
}

// procKB reads a field of /proc/pid/status, in MiB.
func procMiB(t *testing.T, pid int, field string) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// TestL2GrownValueRSS: a value that grows in Redis between a lookup's
// header read and the prefetch's get (SETRANGE, by a proxy in front of a
// real redis-server, as the get goes by) must not be read whole. A
// kvallocd process loads 4 keys of 64 KiB, each grown to 64 MiB just
// before its get, in both formats: whole values (-l2-piece-size 0,
// whose get is a GETRANGE bounded by the expected size) and pieces (the
// default, whose reader refuses a reply longer than a piece). The daemon
// reads at most each value's header, key and 64 KiB + 1 bytes
// (kvallocd_l2_read_bytes_total), the grown values are misses, and its
// RssAnon stays within 32 MiB of what it was before (not checked under
// the race detector, whose shadow memory is in RssAnon; the bytes read
// are). A daemon that read the whole values held 256 MiB more. It logs
// the numbers.
func TestL2GrownValueRSS(t *testing.T) {
	t.Run("whole", func(t *testing.T) { grownValueRSS(t, 0) })
	t.Run("pieces", func(t *testing.T) { grownValueRSS(t, 256<<10) })
}

func grownValueRSS(t *testing.T, pieceSize int64) {
	const size, grow, n = 64 << 10, 64 << 20, 4
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	proxy := newGrowProxy(t, srv.Addr(), grow)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := ln.Addr().String()
	ln.Close()
	sock := filepath.Join(t.TempDir(), "k.sock")
	secretPath := secretFile(t, 1)
	secret, err := l2.ReadSecret(secretPath)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := l2.NewCodec(secret)
	if err != nil {
		t.Fatal(err)
	}
	cmd, log := daemon(t, "-socket", sock, "-pool-size", "64MiB", "-populate=false", "-metrics", maddr,
		"-l2", "redis://"+proxy.addr(), "-l2-timeout", "5s", "-l2-min-rate", "0",
		"-l2-secret-file", secretPath, "-l2-piece-size", strconv.FormatInt(pieceSize, 10))
	c := dialWait(t, sock)

	keys := make([]l1.ObjectKey, n)
	payloads := make([][]byte, n)
	ctx := context.Background()
	var bound float64
	for i := range keys {
		keys[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("grow-%d", i), Model: "m"}
		payloads[i] = make([]byte, size)
		fill(payloads[i], i)
		bound += float64(l2.PrefixLen(&keys[i]) + size + 1)
	}
	// The values go in through a tier of the daemon's format, straight
	// to Redis (not through the proxy).
	be, err := l2.NewRedis(ctx, srv.URL(), l2.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tier, err := l2.NewTier(be, l2.Options{Codec: codec, PieceSize: pieceSize})
	if err != nil {
		t.Fatal(err)
	}
	if got := tier.PutPayloads(ctx, keys, payloads); got != n {
		t.Fatalf("stored %d of %d values", got, n)
	}
	tier.Close()
	sizes := make([]int64, n)
	for i := range sizes {
		sizes[i] = size
	}
	time.Sleep(200 * time.Millisecond) // the daemon's start-up garbage settles
	before, hwmBefore := procMiB(t, cmd.Process.Pid, "RssAnon"), procMiB(t, cmd.Process.Pid, "VmHWM")
	lk, err := c.LookupSized(keys, sizes, true, 0)
	if err != nil || lk.L2 != n || lk.Prefetch != n {
		t.Fatalf("lookup: %+v, %v\n%s", lk, err, log)
	}
	res, p, err := c.ReserveReadPrefixWaitSized(keys, sizes, 1, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	after, hwm := procMiB(t, cmd.Process.Pid, "RssAnon"), procMiB(t, cmd.Process.Pid, "VmHWM")
	read, err := scrape(maddr, "kvallocd_l2_read_bytes_total")
	if err != nil {
		t.Fatal(err)
	}
	corrupt, _ := scrape(maddr, "kvallocd_l2_checksum_failures_total")
	t.Logf("4 values of %d bytes (piece size %d) grown to %d in Redis before their get: %.0f bytes read (bound %.0f), prefix %d, corrupt %.0f; "+
		"RssAnon %.1f MiB before, %.1f after; VmHWM %.1f MiB before, %.1f after (race detector: %v)",
		size, pieceSize, grow, read, bound, p, corrupt, before, after, hwmBefore, hwm, raceOn)
	if p != 0 || res[0].Status != wire.StatusKeyNotExist {
		t.Fatalf("a grown value was served: prefix %d, %v", p, res)
	}
	if read > bound {
		t.Fatalf("the daemon read %.0f bytes of values, over the %.0f their expected sizes allow", read, bound)
	}
	// A whole value's GETRANGE reads one byte past the payload, which
	// shows the value grew: corrupt. A piece's reply is refused at its
	// length, before any byte is read: a miss.
	if pieceSize == 0 && corrupt != n {
		t.Fatalf("%.0f values counted corrupt, want %d", corrupt, n)
	}
	if !raceOn && after > before+32 {
		t.Fatalf("RssAnon %.1f MiB after the loads, over %.1f + 32", after, before)
	}
}
