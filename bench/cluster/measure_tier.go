//go:build linux

package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/kvalloc/kvalloc/internal/rediscluster"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// TierSource names MeasureTier's bandwidths: the l2 package's Tier
// (go-redis, pipelined batches, checked values) over a 3-master Redis
// Cluster.
const TierSource = "l2.Tier, 3-master cluster"

// MeasureTier measures the daemon's own L2 path for each value size: it
// starts a real Redis Cluster of 3 masters on loopback (no replicas, so
// that the figure is the masters' own work), connects the l2 package's
// Tier over its Redis backend, and times Put and Load (the prefetch's
// get, into buffers of the caller's) of batches of batch values (each an
// encoded value: header, full key and CRC32C, checked on every load),
// about budget bytes per size and direction. Every load must load every
// payload whole.
func MeasureTier(ctx context.Context, sizes []int64, batch int, budget int64) (_ []Bandwidth, err error) {
	c, err := rediscluster.Start(ctx, rediscluster.Options{Replicas: -1})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r, err := l2.NewRedis(ctx, c.URL(), l2.RedisOptions{Timeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	t, err := l2.NewTier(r, l2.Options{Timeout: time.Minute})
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
		values := make([][]byte, n)
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		for i := range keys {
			var h [16]byte
			binary.LittleEndian.PutUint64(h[:], uint64(si))
			binary.LittleEndian.PutUint64(h[8:], uint64(i))
			keys[i] = l1.ObjectKey{ChunkHash: string(h[:]), Model: "bench"}
			if values[i], err = l2.Encode(nil, &keys[i], payload); err != nil {
				return nil, err
			}
		}
		b := Bandwidth{ValueBytes: size, Source: TierSource}
		t0 := time.Now()
		for range rounds {
			if got := t.Put(ctx, keys, values); got != n {
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
	if st := t.Stats(); st.Corrupt > 0 || st.Errors > 0 {
		return nil, fmt.Errorf("cluster: %d corrupt values and %d failed calls while measuring", st.Corrupt, st.Errors)
	}
	return out, nil
}
