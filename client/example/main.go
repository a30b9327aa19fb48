//go:build linux

// Example is the Go client's quickstart: it connects to a running kvallocd,
// writes three KV chunks into the shared pool, reads them back under read
// locks, and prints what it did and the daemon's figures.
//
// Usage:
//
//	go run ./cmd/kvallocd &          # a daemon on its defaults
//	go run ./client/example [-socket path]
//
// The chunks go straight into the pool's memory, mapped into this process;
// only keys, offsets and leases cross the socket. The example deletes its
// chunks at the end; kill it at any point and the daemon releases
// whatever it held.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

func main() {
	socket := flag.String("socket", wire.DefaultSocketPath(), "the daemon's socket")
	flag.Parse()
	if err := run(*socket); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(socket string) error {
	c, err := client.Dial(socket, client.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("connected to %s: pool of %d bytes, epoch %#x\n", socket, c.PoolSize(), c.Epoch())

	keys := []l1.ObjectKey{
		{ChunkHash: "chunk-0", Model: "llama-3.1-70b"},
		{ChunkHash: "chunk-1", Model: "llama-3.1-70b"},
		{ChunkHash: "chunk-2", Model: "llama-3.1-70b"},
	}
	const size = 256 << 10
	res, err := c.ReserveWrite(keys, nil, size, l1.ModeAll)
	if err != nil {
		return err
	}
	leases := make([]client.Lease, len(keys))
	for i, r := range res {
		if r.Status != wire.StatusOK {
			return fmt.Errorf("reserve %s: %v", keys[i].ChunkHash, r.Status)
		}
		b, err := c.Bytes(r.Block)
		if err != nil {
			return err
		}
		copy(b, keys[i].ChunkHash+": the KV bytes") // the engine's copy from the GPU goes here
		leases[i] = r.Lease
		fmt.Printf("reserved %s at offset %d (%d bytes)\n", keys[i].ChunkHash, r.Block.Offset, r.Block.Size)
	}
	if sts, err := c.FinishWrite(keys, leases); err != nil || !all(sts) {
		return fmt.Errorf("finish: %v %v", sts, err)
	}
	got, n, err := c.ReserveReadPrefix(keys, 1)
	if err != nil {
		return err
	}
	fmt.Printf("read-locked a prefix of %d chunks\n", n)
	for i, r := range got[:n] {
		b, _ := c.Bytes(r.Block)
		if !bytes.HasPrefix(b, []byte(keys[i].ChunkHash+": the KV bytes")) {
			return fmt.Errorf("%s: not the bytes written", keys[i].ChunkHash)
		}
		leases[i] = r.Lease
	}
	if sts, err := c.FinishRead(keys[:n], leases[:n], 1); err != nil || !all(sts) {
		return fmt.Errorf("release: %v %v", sts, err)
	}
	if sts, err := c.Delete(keys, false); err != nil || !all(sts) {
		return fmt.Errorf("delete: %v %v", sts, err)
	}
	st, err := c.Stats()
	if err != nil {
		return err
	}
	fmt.Printf("verified and deleted; the daemon holds %d objects, %d bytes used of %d, %d connections open\n",
		st.Objects, st.UsedBytes, st.CapacityBytes, st.ConnsOpen)
	return nil
}

func all(sts []wire.Status) bool {
	for _, s := range sts {
		if s != wire.StatusOK {
			return false
		}
	}
	return true
}
