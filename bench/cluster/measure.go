//go:build linux

package cluster

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoRedis wraps a measurement that could not run because redis-server
// or redis-benchmark is missing (make redis installs them).
var ErrNoRedis = errors.New("cluster: redis-server and redis-benchmark are needed (make redis installs them)")

// BenchmarkSource names MeasureRedis's bandwidths: redis-benchmark with 4
// connections, no pipelining, against one redis-server.
const BenchmarkSource = "redis-benchmark, 1 server"

// DefaultValueSizes are the value sizes MeasureRedis measures: the small
// blocks of the replay, and up to 8 MiB.
var DefaultValueSizes = []int64{16 << 10, 64 << 10, 256 << 10, 1 << 20, 8 << 20}

// MeasureRedis starts one redis-server on a loopback port in a temporary
// directory, measures SET and GET of each value size with
// redis-benchmark (clients concurrent connections, no pipelining, about
// budget bytes per size and command), stops the server, and returns the
// bandwidths.
func MeasureRedis(ctx context.Context, sizes []int64, clients int, budget int64) ([]Bandwidth, error) {
	srvPath, err1 := exec.LookPath("redis-server")
	benchPath, err2 := exec.LookPath("redis-benchmark")
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRedis, errors.Join(err1, err2))
	}
	dir, err := os.MkdirTemp("", "clusterbench-redis")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	srv := exec.CommandContext(ctx, srvPath, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	if err := waitPort(ctx, port, 10*time.Second); err != nil {
		return nil, err
	}
	var out []Bandwidth
	for _, size := range sizes {
		n := max(min(budget/size, 20000), 40)
		cmd := exec.CommandContext(ctx, benchPath, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-t", "set,get",
			"-d", strconv.FormatInt(size, 10), "-n", strconv.FormatInt(n, 10), "-c", strconv.Itoa(clients), "--csv")
		raw, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("cluster: redis-benchmark -d %d: %w", size, err)
		}
		recs, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("cluster: redis-benchmark's csv: %w", err)
		}
		b := Bandwidth{ValueBytes: size, Source: BenchmarkSource}
		for _, r := range recs {
			if len(r) < 3 {
				continue
			}
			rps, err := strconv.ParseFloat(r[1], 64)
			if err != nil {
				continue
			}
			switch r[0] {
			case "SET":
				b.Set = rps * float64(size)
			case "GET":
				b.Get = rps * float64(size)
				if l, err := strconv.ParseFloat(r[2], 64); err == nil {
					b.GetLatency = time.Duration(l * float64(time.Millisecond))
				}
			}
		}
		if b.Get == 0 || b.Set == 0 {
			return nil, fmt.Errorf("cluster: redis-benchmark -d %d printed no SET and GET rates: %q", size, raw)
		}
		out = append(out, b)
	}
	return out, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitPort(ctx context.Context, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cluster: redis-server did not listen on port %d within %v: %w", port, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
