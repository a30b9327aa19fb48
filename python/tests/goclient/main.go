//go:build linux

// Goclient is the Go side of the Python client's tests: it runs one batch
// call through package client against a daemon and prints what it saw as
// JSON, so that a test can check across languages what the other wrote.
//
// Usage:
//
//	goclient -socket PATH stats
//		Print the daemon's stats, by PROTOCOL.md's names.
//	goclient -socket PATH -size N -stamp K read < keys.json
//		Read-lock the keys (ReserveRead, one lock each), print each key's
//		status with the first and last K bytes of its N-byte object in
//		hex, then release the locks.
//	goclient -socket PATH -size N write < stamps.json
//		Reserve the keys for N-byte objects, write each key's head at the
//		object's start and its tail at its end, finish, and print the
//		statuses of both calls.
//
// keys.json is a JSON array of keys in the conformance vectors' form
// ({"chunk_hash": "<hex>", "model", "kv_rank", "group_id",
// "cache_salt"}); stamps.json the same with "head" and "tail" in hex.
// Exit status 1 on any error, with the error on stderr.
package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

type jsonKey struct {
	ChunkHash string `json:"chunk_hash"`
	Model     string `json:"model"`
	KVRank    uint32 `json:"kv_rank"`
	GroupID   uint32 `json:"group_id"`
	CacheSalt string `json:"cache_salt"`
	Head      string `json:"head,omitempty"`
	Tail      string `json:"tail,omitempty"`
}

type readOut struct {
	Status string `json:"status"`
	Offset int64  `json:"offset"`
	Head   string `json:"head,omitempty"`
	Tail   string `json:"tail,omitempty"`
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "goclient:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("goclient", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket (default wire.DefaultSocketPath)")
	size := fs.Int64("size", 0, "the objects' size in bytes")
	stamp := fs.Int("stamp", 16, "read: the bytes to print at each end of an object")
	timeout := fs.Duration("timeout", 10*time.Second, "every call's deadline")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one command: stats, read or write")
	}
	c, err := client.Dial(*socket, client.Options{Timeout: *timeout})
	if err != nil {
		return err
	}
	defer c.Close()
	out := json.NewEncoder(stdout)
	switch fs.Arg(0) {
	case "stats":
		st, err := c.Stats()
		if err != nil {
			return err
		}
		m := map[string]uint64{}
		for i, v := range st.Values() {
			m[wire.StatsNames[i]] = v
		}
		return out.Encode(m)
	case "read":
		_, keys, err := readKeys(stdin)
		if err != nil {
			return err
		}
		res, err := c.ReserveRead(keys, 1)
		if err != nil {
			return err
		}
		var got []readOut
		var held []l1.ObjectKey
		var leases []client.Lease
		for i, r := range res {
			o := readOut{Status: r.Status.String()}
			if r.Status == wire.StatusOK {
				b, err := c.Bytes(r.Block)
				if err != nil {
					return err
				}
				k := min(*stamp, int(*size))
				o.Offset = r.Block.Offset
				o.Head = hex.EncodeToString(b[:k])
				o.Tail = hex.EncodeToString(b[*size-int64(k) : *size])
				held, leases = append(held, keys[i]), append(leases, r.Lease)
			}
			got = append(got, o)
		}
		if _, err := c.FinishRead(held, leases, 1); err != nil {
			return err
		}
		return out.Encode(got)
	case "write":
		jk, keys, err := readKeys(stdin)
		if err != nil {
			return err
		}
		res, err := c.ReserveWrite(keys, nil, *size, l1.ModeAll)
		if err != nil {
			return err
		}
		var done []l1.ObjectKey
		var leases []client.Lease
		reserved := make([]string, len(res))
		for i, r := range res {
			reserved[i] = r.Status.String()
			if r.Status != wire.StatusOK {
				continue
			}
			b, err := c.Bytes(r.Block)
			if err != nil {
				return err
			}
			head, err1 := hex.DecodeString(jk[i].Head)
			tail, err2 := hex.DecodeString(jk[i].Tail)
			if err := errors.Join(err1, err2); err != nil {
				return err
			}
			copy(b, head)
			copy(b[*size-int64(len(tail)):], tail)
			done, leases = append(done, keys[i]), append(leases, r.Lease)
		}
		st, err := c.FinishWrite(done, leases)
		if err != nil {
			return err
		}
		finished := make([]string, len(st))
		for i, s := range st {
			finished[i] = s.String()
		}
		return out.Encode(map[string][]string{"reserved": reserved, "finished": finished})
	}
	return fmt.Errorf("unknown command %q", fs.Arg(0))
}

func readKeys(r io.Reader) ([]jsonKey, []l1.ObjectKey, error) {
	var jk []jsonKey
	if err := json.NewDecoder(r).Decode(&jk); err != nil {
		return nil, nil, fmt.Errorf("reading the keys: %w", err)
	}
	keys := make([]l1.ObjectKey, len(jk))
	for i, k := range jk {
		h, err := hex.DecodeString(k.ChunkHash)
		if err != nil {
			return nil, nil, fmt.Errorf("key %d: %w", i, err)
		}
		keys[i] = l1.ObjectKey{ChunkHash: string(h), Model: k.Model, KVRank: k.KVRank, GroupID: k.GroupID, CacheSalt: k.CacheSalt}
	}
	return jk, keys, nil
}
