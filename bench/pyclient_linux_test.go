//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// BenchmarkPythonClient times the Python client (python/kvalloc) against
// the Go client (client/) on one daemon, served in this process over a
// Unix socket with kvallocd's defaults and a 45 GiB pool that is never
// written (no populate): the same cycle of 5700 keys of 8 MiB
// (reserve_write, finish_write, reserve_read, finish_read, delete, every
// status checked), and an empty round trip (ping). The Python side is
// python/bench/driver.py, one process for the whole benchmark, told over
// a pipe to run b.N of an op; the timer covers the command and its
// answer. The Python cycle makes one KeyBatch per cycle (op=cycle), or
// passes the keys as a list to every call (op=cycle-list). It skips where
// python3 ($PYTHON) is missing.
func BenchmarkPythonClient(b *testing.B) {
	py := pythonDriver(b)
	sock := filepath.Join(b.TempDir(), "kvallocd.sock")
	cfg := server.Defaults()
	cfg.SocketPath, cfg.PoolSize, cfg.Pool.Populate = sock, prodKeys*prodObject+64*MiB, false
	srv, err := server.New(cfg)
	if err != nil {
		b.Skipf("daemon unavailable: %v", err)
	}
	go srv.Serve()
	b.Cleanup(func() { srv.Close() })
	keys := cycleKeys(prodKeys, 2)

	c, err := client.Dial(sock, client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	leases := make([]client.Lease, prodKeys)
	b.Run("client=go/op=cycle", func(b *testing.B) {
		goCycle(b, c, keys, leases)
		for b.Loop() {
			goCycle(b, c, keys, leases)
		}
		perUnit(b, prodKeys, "ns/key")
	})
	b.Run("client=go/op=ping", func(b *testing.B) {
		for b.Loop() {
			if err := c.Ping(); err != nil {
				b.Fatal(err)
			}
		}
	})

	d := py.start(b, sock)
	spec := struct {
		Model  string   `json:"model"`
		KVRank uint32   `json:"kv_rank"`
		Size   int64    `json:"size"`
		Hashes []string `json:"hashes"`
	}{Model: keys[0].Model, KVRank: keys[0].KVRank, Size: prodObject}
	for _, k := range keys {
		spec.Hashes = append(spec.Hashes, hex.EncodeToString([]byte(k.ChunkHash)))
	}
	js, _ := json.Marshal(spec)
	d.do(b, append(append([]byte("keys "), js...), '\n'))
	for _, op := range []string{"cycle", "cycle-list", "ping"} {
		b.Run("client=python/op="+op, func(b *testing.B) {
			d.run(b, op, 1) // warm, as the Go cycle is
			b.ResetTimer()
			d.run(b, op, b.N)
			b.StopTimer()
			if op != "ping" {
				perUnit(b, prodKeys, "ns/key")
			}
		})
	}
}

// goCycle is the Go client's cycle, every status checked.
func goCycle(b *testing.B, c *client.Client, keys []cycleKey, leases []client.Lease) {
	res, err := c.ReserveWrite(keys, nil, prodObject, l1.ModeAll)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		if r.Status != wire.StatusOK {
			b.Fatalf("ReserveWrite key %d: %v", i, r.Status)
		}
		leases[i] = r.Lease
	}
	mustAllOK(b, "FinishWrite")(c.FinishWrite(keys, leases))
	res, err = c.ReserveRead(keys, 1)
	if err != nil {
		b.Fatal(err)
	}
	for i, r := range res {
		if r.Status != wire.StatusOK {
			b.Fatalf("ReserveRead key %d: %v", i, r.Status)
		}
		leases[i] = r.Lease
	}
	mustAllOK(b, "FinishRead")(c.FinishRead(keys, leases, 1))
	mustAllOK(b, "Delete")(c.Delete(keys, false))
}

func mustAllOK(b *testing.B, op string) func([]client.Status, error) {
	return func(sts []client.Status, err error) {
		if err != nil {
			b.Fatalf("%s: %v", op, err)
		}
		for i, s := range sts {
			if s != wire.StatusOK {
				b.Fatalf("%s key %d: %v", op, i, s)
			}
		}
	}
}

// python is the interpreter and the driver script.
type python struct{ exe, script string }

// pythonDriver finds python3 ($PYTHON) and python/bench/driver.py, or
// skips.
func pythonDriver(b *testing.B) python {
	name := os.Getenv("PYTHON")
	if name == "" {
		name = "python3"
	}
	exe, err := exec.LookPath(name)
	if err != nil {
		b.Skipf("python3 unavailable: %v", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "python", "bench", "driver.py"))
	if err != nil {
		b.Fatal(err)
	}
	return python{exe, script}
}

// driver is a running driver.py. Its commands are written from a reused
// buffer and its answers read in place, so that a command costs no
// allocation in this process and allocs/op is the daemon's steady state
// whatever b.N is (TestAllocsPerOpIndependentOfN).
type driver struct {
	in  io.Writer
	out *bufio.Reader
	buf []byte
}

func (p python) start(b *testing.B, sock string) *driver {
	cmd := exec.Command(p.exe, p.script, sock)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return &driver{in: in, out: bufio.NewReader(out)}
}

// run has the driver do op n times and waits for its answer.
func (d *driver) run(b *testing.B, op string, n int) {
	d.buf = append(append(d.buf[:0], op...), ' ')
	d.do(b, append(strconv.AppendInt(d.buf, int64(n), 10), '\n'))
}

// do sends one command line and waits for its answer.
func (d *driver) do(b *testing.B, cmd []byte) {
	if _, err := d.in.Write(cmd); err != nil {
		b.Fatal(err)
	}
	line, err := d.out.ReadSlice('\n')
	if err != nil {
		b.Fatalf("driver.py: %v", err)
	}
	if !bytes.Equal(line, []byte("ok\n")) {
		b.Fatalf("driver.py %.40s: %s", cmd, line)
	}
}
