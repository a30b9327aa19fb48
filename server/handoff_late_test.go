//go:build linux

package server_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/wire"
)

// The harness's late clients (role "holate", KVALLOC_HO_LATE "writer" or
// "reader"): a process that takes a write reservation (or a read lock on
// an object of its own) and keeps copying into (out of) its block until
// the harness says a restart happened (it writes the new daemon's epoch to
// KVALLOC_HO_EPOCH_FILE once that daemon serves, after the old one ended
// every connection), and then for lateCopy more: bytes copied after its
// connection ended. A writer fills its whole block with its key's stamp,
// so that a block the new daemon gave another key shows in that key's
// stamps; a reader checks its object's stamps all along. Without a
// restart within lateWait it finishes and starts again. At the end it
// prints "late <copies after a restart> <wrong bytes seen>".

const (
	lateCopy = 100 * time.Millisecond
	lateWait = 3 * time.Second
)

func readEpochFile(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func lateHarnessClient() int {
	sock, id, role := os.Getenv(childSocket), os.Getenv("KVALLOC_HO_ID"), os.Getenv("KVALLOC_HO_LATE")
	epochFile := os.Getenv("KVALLOC_HO_EPOCH_FILE")
	stop := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	var c *client.Client
	connect := func() error {
		if c != nil {
			c.Close()
		}
		var err error
		for start := time.Now(); ; time.Sleep(2 * time.Millisecond) {
			if c, err = client.Dial(sock, client.Options{Timeout: 10 * time.Second}); err == nil {
				return nil
			}
			if time.Since(start) > 15*time.Second {
				return err
			}
		}
	}
	if err := connect(); err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	late, wrong, n := 0, 0, 0
	fill := func(b []byte, s uint64) {
		for i := 0; i+8 <= len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], s)
		}
	}
	check := func(b []byte, s uint64) {
		if binary.LittleEndian.Uint64(b) != s {
			wrong += 8
		}
		if binary.LittleEndian.Uint64(b[len(b)-8:]) != s {
			wrong += 8
		}
	}
	for {
		select {
		case <-stop:
			fmt.Printf("late %d %d\n", late, wrong)
			return 0
		default:
		}
		e0 := readEpochFile(epochFile)
		k := hoKeyOf(fmt.Sprintf("late-%s-%d", id, n))
		n++
		var res []client.Result
		var err error
		if role == "writer" {
			res, err = c.ReserveWrite([]l1.ObjectKey{k}, nil, handoffObject, l1.ModeAll)
		} else {
			// An object of its own, then a read lock on it.
			if res, err = c.ReserveWrite([]l1.ObjectKey{k}, nil, handoffObject, l1.ModeAll); err == nil && res[0].Status == wire.StatusOK {
				var b []byte
				if b, err = c.Bytes(res[0].Block); err == nil {
					fill(b, stampOf(k))
					_, err = c.FinishWrite([]l1.ObjectKey{k}, []client.Lease{res[0].Lease})
				}
			}
			if err == nil {
				res, err = c.ReserveRead([]l1.ObjectKey{k}, 1)
			}
		}
		if err == nil && res[0].Status != wire.StatusOK {
			err = fmt.Errorf("%v: %v", k, res[0].Status)
		}
		var b []byte
		if err == nil {
			b, err = c.Bytes(res[0].Block)
		}
		if err != nil {
			if errors.Is(err, client.ErrDisconnected) || errors.Is(err, l1.ErrClosed) {
				if cerr := connect(); cerr != nil {
					fmt.Println("reconnect:", cerr)
					return 1
				}
				continue
			}
			fmt.Println("late client:", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		restarted := false
		for deadline := time.Now().Add(lateWait); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if role == "writer" {
				fill(b, stampOf(k))
			} else {
				check(b, stampOf(k))
			}
			if readEpochFile(epochFile) != e0 {
				restarted = true
				break
			}
		}
		if restarted {
			// The connection ended a while ago: these copies are late.
			for until := time.Now().Add(lateCopy); time.Now().Before(until); time.Sleep(time.Millisecond) {
				if role == "writer" {
					fill(b, stampOf(k))
				} else {
					check(b, stampOf(k))
				}
			}
			late++
		}
		if role == "writer" {
			_, err = c.FinishWrite([]l1.ObjectKey{k}, []client.Lease{res[0].Lease})
		} else {
			_, err = c.FinishRead([]l1.ObjectKey{k}, []client.Lease{res[0].Lease}, 1)
		}
		if err != nil {
			if cerr := connect(); cerr != nil {
				fmt.Println("reconnect:", cerr)
				return 1
			}
		}
	}
}
