//go:build linux

package client_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kvalloc/kvalloc/client"
	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// daemon starts a real daemon and dials it with version.
func daemon(t *testing.T, version uint32) *client.Client {
	t.Helper()
	s, err := server.New(server.Config{SocketPath: filepath.Join(t.TempDir(), "kvallocd.sock"), PoolSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Close() })
	c, err := client.Dial(s.SocketPath(), client.Options{Timeout: 10 * time.Second, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mismatched presents each of two write leases with the other's key, then
// each with its own: NOT_OWNER twice, then OK twice, in every version.
func mismatched(c *client.Client) error {
	ks := []l1.ObjectKey{{ChunkHash: "a", Model: "m"}, {ChunkHash: "b", Model: "m"}}
	res, err := c.ReserveWrite(ks, nil, 4096, l1.ModeAll)
	if err != nil {
		return err
	}
	ls := []client.Lease{res[0].Lease, res[1].Lease}
	sts, err := c.FinishWrite([]l1.ObjectKey{ks[1], ks[0]}, ls)
	if err != nil || !slices.Equal(sts, []wire.Status{wire.StatusNotOwner, wire.StatusNotOwner}) {
		return fmt.Errorf("leases under each other's keys: %v %v, want NOT_OWNER twice", sts, err)
	}
	// A copy of the key, not the caller's strings: compared by value.
	own := []l1.ObjectKey{{ChunkHash: string([]byte("a")), Model: "m"}, ks[1]}
	if sts, err = c.FinishWrite(own, ls); err != nil || !slices.Equal(sts, []wire.Status{wire.StatusOK, wire.StatusOK}) {
		return fmt.Errorf("under their own keys: %v %v, want OK twice", sts, err)
	}
	return nil
}

// TestHandlesKeepVersion1Answers: a key presented with another key's
// lease is NOT_OWNER over version 2 as over version 1.
func TestHandlesKeepVersion1Answers(t *testing.T) {
	for _, v := range []uint32{wire.Version, wire.Version2} {
		if err := mismatched(daemon(t, v)); err != nil {
			t.Errorf("version %d: %v", v, err)
		}
	}
}

// TestHandlesKeepVersion1AnswersBites: a client that names a lease's
// handle whatever key comes with it is caught.
func TestHandlesKeepVersion1AnswersBites(t *testing.T) {
	c := daemon(t, wire.Version2)
	client.HandlesForAnyKey(c)
	err := mismatched(c)
	if err == nil {
		t.Fatal("a client that ignores the key presented with a lease passed")
	}
	t.Logf("caught: %v", err)
}
