package l2_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l2"
)

// respServer is a stand-in for a Redis node that speaks RESP2 and
// answers every command with what answer returns: how a node answers
// while it loads its dataset (LOADING) or while its slots move (MOVED),
// which a real redis-server cannot be made to do on demand. It counts
// the commands it receives, by name.
type respServer struct {
	ln     net.Listener
	answer func(cmd []string) string
	mu     sync.Mutex
	counts map[string]int
	wg     sync.WaitGroup
}

func newRESPServer(t *testing.T, answer func(s *respServer, cmd []string) string) *respServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &respServer{ln: ln, counts: map[string]int{}}
	s.answer = func(cmd []string) string { return answer(s, cmd) }
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *respServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

func (s *respServer) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[name]
}

// serve reads RESP arrays of bulk strings and writes one answer each,
// until the connection or the listener closes.
func (s *respServer) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		name := strings.ToUpper(cmd[0])
		if name == "CLUSTER" && len(cmd) > 1 {
			name += " " + strings.ToUpper(cmd[1])
		}
		s.mu.Lock()
		s.counts[name]++
		s.mu.Unlock()
		if _, err := io.WriteString(c, s.answer(append([]string{name}, cmd[1:]...))); err != nil {
			return
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
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

// dataCommands are the commands the tier's backend sends for data.
var dataCommands = []string{"GET", "SET", "GETRANGE", "STRLEN", "DEL"}

func (s *respServer) dataCalls() int {
	n := 0
	for _, c := range dataCommands {
		n += s.count(c)
	}
	return n
}

// refusedTier checks a tier over a store that refuses every data
// command: no payload served, no value stored, no call past its timeout,
// and the breaker opens and then keeps the calls from the store.
func refusedTier(t *testing.T, tier *l2.Tier, srv *respServer) {
	t.Helper()
	ctx := context.Background()
	keys := keysN("refused", 8)
	_, vs := payloads(keys, 64<<10)
	start := time.Now()
	for range 3 {
		if n := tier.Put(ctx, keys, vs); n != 0 {
			t.Fatalf("a refusing store stored %d values", n)
		}
		for i, g := range tier.Get(ctx, keys) {
			if g != nil {
				t.Fatalf("a refusing store served key %d", i)
			}
		}
		for i, sz := range tier.Head(ctx, keys) {
			if sz >= 0 {
				t.Fatalf("a refusing store's Head found key %d (%d bytes)", i, sz)
			}
		}
	}
	el := time.Since(start)
	if el > 9*tier.Options().Timeout {
		t.Fatalf("9 calls to a refusing store took %v, past 9 timeouts of %v", el, tier.Options().Timeout)
	}
	s := tier.Stats()
	if s.Breaker != l2.Open || s.BreakerOpens == 0 {
		t.Fatalf("the breaker is %v after 9 refused calls (%+v)", s.Breaker, s)
	}
	before := srv.dataCalls()
	if before == 0 {
		t.Fatal("the store saw no data command: the test tested nothing")
	}
	for range 20 {
		tier.Get(ctx, keys)
	}
	if got := srv.dataCalls() - before; got != 0 {
		t.Fatalf("the open breaker let %d data commands through", got)
	}
	if s := tier.Stats(); s.Hits != 0 || s.Puts != 0 || s.PutFailures == 0 || s.Errors == 0 {
		t.Fatalf("stats %+v", s)
	}
	t.Logf("%d calls in %v; %+v", 9, el, tier.Stats())
}

// TestRedisLoadingIsMiss: a plain Redis that answers LOADING to every
// command, as one does while it reads its dataset after a restart: every
// get and head is a miss, every put is a failure counted, none past its
// timeout, none an error, and the breaker opens and stops the calls.
func TestRedisLoadingIsMiss(t *testing.T) {
	srv := newRESPServer(t, func(_ *respServer, cmd []string) string {
		if cmd[0] == "HELLO" {
			return "-ERR unknown command 'HELLO'\r\n" // speak RESP2
		}
		return "-LOADING Redis is loading the dataset in memory\r\n"
	})
	// +plain: a seed that answers LOADING to INFO does not say what it
	// is, and an undecided client would only ask it again (no data
	// command); the URL says.
	tier, _ := newTier(t, fmt.Sprintf("redis+plain://127.0.0.1:%d", srv.port()),
		l2.Options{Timeout: 500 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: time.Hour})
	refusedTier(t, tier, srv)
}

// TestRedisMovedStormIsMiss: a cluster whose only node claims every slot
// and answers every data command with MOVED, to itself, as a node does
// while a resharding moves its slots: every call is a miss or a failed
// put, none past its timeout, none an error; the tier does not chase the
// redirects (one round per call), the client's slot-map reloads stay
// few, and the breaker opens and stops the storm.
func TestRedisMovedStormIsMiss(t *testing.T) {
	srv := newRESPServer(t, func(s *respServer, cmd []string) string {
		p := s.port()
		switch cmd[0] {
		case "HELLO":
			return "-ERR unknown command 'HELLO'\r\n"
		case "INFO":
			b := "# Cluster\r\ncluster_enabled:1\r\n"
			return fmt.Sprintf("$%d\r\n%s\r\n", len(b), b)
		case "CLUSTER SLOTS":
			id := strings.Repeat("a", 40)
			return fmt.Sprintf("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:%d\r\n$40\r\n%s\r\n", p, id)
		case "READONLY", "PING":
			return "+OK\r\n"
		}
		for _, d := range dataCommands {
			if cmd[0] == d {
				return fmt.Sprintf("-MOVED 1234 127.0.0.1:%d\r\n", p)
			}
		}
		return "-ERR unknown command\r\n"
	})
	tier, _ := newTier(t, fmt.Sprintf("redis://127.0.0.1:%d", srv.port()),
		l2.Options{Timeout: 500 * time.Millisecond, BreakerFailures: 3, BreakerCooldown: time.Hour})
	refusedTier(t, tier, srv)
	// Each of the calls before the breaker opened is one round: its
	// commands, not a chase of redirects.
	if d := srv.dataCalls(); d > 3*8*2 {
		t.Fatalf("%d data commands for 3 refused calls of 8 keys: the tier chases MOVED", d)
	}
	if r := srv.count("CLUSTER SLOTS"); r == 0 || r > 10 {
		t.Fatalf("%d slot-map reloads: a MOVED storm became a reload storm", r)
	}
}

// TestRedisOOMIsDroppedPut: a real redis-server out of memory under
// maxmemory-policy noeviction answers OOM to every SET: each put fails at
// once (one round trip, not a timeout), counted, and never as an error.
// Redis still serves reads, so the values stored before are served byte
// for byte, and a read that succeeds keeps the breaker closed; puts alone
// that fail in a row open it; once Redis has room again, the breaker
// closes and puts are stored.
func TestRedisOOMIsDroppedPut(t *testing.T) {
	srv := rediscluster.NewServer(t, rediscluster.Options{})
	const cooldown = 200 * time.Millisecond
	const timeout = 2 * time.Second
	tier, _ := newTier(t, srv.URL(), l2.Options{Timeout: timeout, BreakerFailures: 3, BreakerCooldown: cooldown})
	ctx := context.Background()
	old := keysN("before-oom", 4)
	ps, vs := payloads(old, 1<<20)
	if n := tier.Put(ctx, old, vs); n != len(old) {
		t.Fatalf("stored %d of %d before the OOM", n, len(old))
	}
	rc := srv.Client()
	defer rc.Close()
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil { // below what it holds: every write is refused
		t.Fatal(err)
	}
	keys := keysN("oom", 4)
	_, nvs := payloads(keys, 8<<20)
	start := time.Now()
	if n := tier.Put(ctx, keys, nvs); n != 0 {
		t.Fatalf("Redis out of memory stored %d values", n)
	}
	if el := time.Since(start); el > timeout/2 {
		t.Fatalf("a put refused with OOM took %v: it should fail at once", el)
	}
	if s := tier.Stats(); s.PutFailures != uint64(len(keys)) || s.Errors != 1 {
		t.Fatalf("after one refused put: %+v", s)
	}
	got := tier.Get(ctx, old)
	for i := range old {
		if !bytes.Equal(got[i], ps[i]) {
			t.Fatalf("key %d: not served while Redis refused writes", i)
		}
	}
	if s := tier.Stats(); s.Breaker != l2.Closed {
		t.Fatalf("breaker %v after a served read", s.Breaker)
	}
	for range 3 {
		tier.Put(ctx, keys, nvs)
	}
	if s := tier.Stats(); s.Breaker != l2.Open {
		t.Fatalf("breaker %v after 3 refused puts in a row: %+v", s.Breaker, s)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for tier.Put(ctx, keys, nvs) != len(keys) {
		if time.Now().After(deadline) {
			t.Fatalf("puts not stored after Redis had room again: %+v", tier.Stats())
		}
		time.Sleep(cooldown / 4)
	}
	if s := tier.Stats(); s.Breaker != l2.Closed || s.BreakerOpens != 1 {
		t.Fatalf("breaker %v (opened %d times) after a stored put", s.Breaker, s.BreakerOpens)
	}
	t.Logf("%+v", tier.Stats())
}
