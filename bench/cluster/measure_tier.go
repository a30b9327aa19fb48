//go:build linux

package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvalloc/kvalloc/bench/sim"
	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// TierSource names MeasureTier's bandwidths on whole values: the l2
// package's Tier (go-redis, pipelined batches, checked values) over a
// 3-master Redis Cluster.
const TierSource = "l2.Tier, 3-master cluster"

// TierSourceOf names MeasureTier's bandwidths in pieces of pieceSize
// (0: whole values, TierSource).
func TierSourceOf(pieceSize int64) string {
	if pieceSize == 0 {
		return TierSource
	}
	return "l2.Tier in pieces of " + sim.FormatSize(pieceSize) + ", 3-master cluster"
}

// tierCodec is MeasureTier's MAC codec, a fixed secret: kvallocd runs
// with one (-l2-secret-file), and every value's or piece's payload is
// hashed by its writer and its reader.
func tierCodec() (*l2.Codec, error) {
	b := make([]byte, l2.MinSecret)
	for i := range b {
		b[i] = byte(3*i + 5)
	}
	s, err := l2.NewSecret(b)
	if err != nil {
		return nil, err
	}
	return l2.NewCodec(s)
}

// MeasureTier measures the daemon's own L2 path for each value size: it
// starts a real Redis Cluster of 3 masters on loopback (no replicas, so
// that the figure is the masters' own work), connects the l2 package's
// Tier over its Redis backend, with a MAC secret as kvallocd runs, in
// pieces of pieceSize (kvallocd's -l2-piece-size; 0: whole values), and
// times PutPayloads (the daemon's write-through, from the caller's
// memory) and Load (the prefetch's get, into buffers of the caller's)
// of batches of batch objects, about budget bytes per size and
// direction; every payload is checked (its CRC32C and MAC) on every
// load. Every load must load every payload whole.
func MeasureTier(ctx context.Context, sizes []int64, batch int, budget, pieceSize int64) (_ []Bandwidth, err error) {
	c, err := rediscluster.Start(ctx, rediscluster.Options{Replicas: -1})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r, err := l2.NewRedis(ctx, c.URL(), l2.RedisOptions{Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	codec, err := tierCodec()
	if err != nil {
		return nil, err
	}
	t, err := l2.NewTier(r, l2.Options{Timeout: time.Minute, Codec: codec, PieceSize: pieceSize})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := t.Close(); err == nil {
			err = cerr
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var out []Bandwidth
	for si, size := range sizes {
		n := max(1, min(batch, int(budget/size)))
		rounds := max(1, int(budget/(size*int64(n))))
		keys := make([]l1.ObjectKey, n)
		payloads := make([][]byte, n)
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		for i := range keys {
			var h [16]byte
			binary.LittleEndian.PutUint64(h[:], uint64(si))
			binary.LittleEndian.PutUint64(h[8:], uint64(i))
			keys[i] = l1.ObjectKey{ChunkHash: string(h[:]), Model: "bench"}
			payloads[i] = payload
		}
		b := Bandwidth{ValueBytes: size, Source: TierSourceOf(pieceSize)}
		t0 := time.Now()
		for range rounds {
			if got := t.PutPayloads(ctx, keys, payloads); got != n {
				return nil, fmt.Errorf("cluster: the tier stored %d of %d values of %d bytes", got, n, size)
			}
		}
		b.Set = float64(size) * float64(n*rounds) / time.Since(t0).Seconds()
		// Into buffers of their own, as the daemon's prefetch loads into
		// its blocks (Tier.Load).
		dst := make([][]byte, n)
		for i := range dst {
			dst[i] = make([]byte, size)
		}
		t0 = time.Now()
		for range rounds {
			for i, ok := range t.Load(ctx, keys, dst) {
				if !ok {
					return nil, fmt.Errorf("cluster: the tier did not load value %d of %d bytes", i, size)
				}
			}
		}
		if !bytes.Equal(dst[0], payload) {
			return nil, fmt.Errorf("cluster: the tier loaded other bytes for a value of %d bytes", size)
		}
		el := time.Since(t0)
		b.Get = float64(size) * float64(n*rounds) / el.Seconds()
		b.GetLatency = el / time.Duration(rounds)
		t.Delete(ctx, keys)
		out = append(out, b)
	}
	if st := t.Stats(); st.Corrupt > 0 || st.Forged > 0 || st.Errors > 0 {
		return nil, fmt.Errorf("cluster: %d corrupt values, %d forged and %d failed calls while measuring", st.Corrupt, st.Forged, st.Errors)
	}
	return out, nil
}
