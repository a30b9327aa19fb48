//go:build linux

// Twonodes is the L2 tier's quickstart: two kvallocd daemons, standing for
// two nodes, share one Redis Cluster; what an engine on node A stores, an
// engine on node B finds and reads.
//
// Usage:
//
//	go run ./client/example/twonodes -a /tmp/nodes/a.sock -b /tmp/nodes/b.sock [-chunks 16] [-size 262144]
//
// It writes -chunks chunks of -size bytes on node A, each stamped with its
// own bytes, and finishes them, so that A copies them to L2 in the
// background. Then, on node B, it looks the prompt up until B reports the
// chunks in L2 (the lookup also starts loading them into B's pool),
// reads the prefix with a deadline, checks every byte and releases it.
// It prints the lookup's L1 and L2 counts and exits 1 unless B read every
// chunk, byte for byte. It deletes nothing: run it twice and the second
// run's chunks are new (each run names its chunks after its process id).
//
// two-nodes.sh beside this file starts the whole setup (a local cluster of
// three masters and three replicas, two daemons), runs this program, and
// tears everything down: `make two-nodes`.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

func main() {
	a := flag.String("a", "/tmp/nodes/a.sock", "node A's kvallocd socket: the writer")
	b := flag.String("b", "/tmp/nodes/b.sock", "node B's kvallocd socket: the reader")
	chunks := flag.Int("chunks", 16, "chunks to share, 1 to 1024")
	size := flag.Int64("size", 256<<10, "bytes per chunk, 1 to 64 MiB")
	wait := flag.Duration("wait", 20*time.Second, "how long B may take to find the chunks in L2")
	flag.Parse()
	if *chunks < 1 || *chunks > 1024 || *size < 1 || *size > 64<<20 {
		fmt.Fprintln(os.Stderr, "twonodes: -chunks must be 1 to 1024 and -size 1 to 64 MiB")
		os.Exit(2)
	}
	if err := run(*a, *b, *chunks, *size, *wait, fmt.Sprintf("twonodes-%d-%d", os.Getpid(), time.Now().UnixNano())); err != nil {
		fmt.Fprintln(os.Stderr, "twonodes:", err)
		os.Exit(1)
	}
}

// stamp fills b with bytes that depend on the chunk's index.
func stamp(b []byte, i int) {
	for j := range b {
		b[j] = byte(j*7 + i*13 + 1)
	}
}

func run(sockA, sockB string, n int, size int64, wait time.Duration, name string) error {
	a, err := client.Dial(sockA, client.Options{})
	if err != nil {
		return fmt.Errorf("node A: %w", err)
	}
	defer a.Close()
	b, err := client.Dial(sockB, client.Options{})
	if err != nil {
		return fmt.Errorf("node B: %w", err)
	}
	defer b.Close()

	keys := make([]l1.ObjectKey, n)
	for i := range keys {
		keys[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%s-%04d", name, i), Model: "llama-3.1-8b"}
	}
	res, err := a.ReserveWrite(keys, nil, size, l1.ModeAll)
	if err != nil {
		return fmt.Errorf("node A: %w", err)
	}
	leases := make([]client.Lease, n)
	for i, r := range res {
		if r.Status != wire.StatusOK {
			return fmt.Errorf("node A: reserve %s: %v", keys[i].ChunkHash, r.Status)
		}
		bs, err := a.Bytes(r.Block)
		if err != nil {
			return fmt.Errorf("node A: %w", err)
		}
		stamp(bs[:size], i)
		leases[i] = r.Lease
	}
	if _, err := a.FinishWrite(keys, leases); err != nil {
		return fmt.Errorf("node A: %w", err)
	}
	fmt.Printf("node A: stored %d chunks of %d bytes; it copies them to L2 in the background\n", n, size)

	// B's scheduler asks how much of the prompt the node and the cluster
	// hold. The copies are asynchronous, so it asks until L2 has them all.
	start := time.Now()
	var look client.Lookup
	for {
		look, err = b.Lookup(keys, true)
		if err != nil {
			return fmt.Errorf("node B: %w", err)
		}
		if int(look.L1)+int(look.L2) == n {
			break
		}
		if time.Since(start) > wait {
			return fmt.Errorf("node B: after %v the lookup finds %d in L1 and %d in L2 of %d chunks: is -l2 the same cluster on both daemons?", wait, look.L1, look.L2, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Printf("node B: lookup after %v: %d chunks in its L1, %d in L2, prefetching\n", time.Since(start).Round(time.Millisecond), look.L1, look.L2)

	// B's worker reads the prefix, waiting for the prefetch up to a deadline.
	rr, p, err := b.ReserveReadPrefixWait(keys, 1, 5*time.Second)
	if err != nil {
		return fmt.Errorf("node B: %w", err)
	}
	want := make([]byte, size)
	var wrong error
	for i := range p {
		bs, err := b.Bytes(rr[i].Block)
		if err != nil {
			return fmt.Errorf("node B: %w", err)
		}
		stamp(want, i)
		if !bytes.Equal(bs[:size], want) {
			wrong = errors.Join(wrong, fmt.Errorf("node B: chunk %d: wrong bytes", i))
		}
	}
	rl := make([]client.Lease, p)
	for i := range rl {
		rl[i] = rr[i].Lease
	}
	if _, err := b.FinishRead(keys[:p], rl, 1); err != nil {
		return fmt.Errorf("node B: %w", err)
	}
	if wrong != nil {
		return wrong
	}
	if p != n {
		return fmt.Errorf("node B: read a prefix of %d of %d chunks", p, n)
	}
	fmt.Printf("node B: read all %d chunks, every byte as node A wrote it\n", n)
	return nil
}
