//go:build linux

package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/server"
	"github.com/kvalloc/kvalloc/wire"
)

// debugGet reads /debug/verify.
func debugGet(t *testing.T, s *server.Server) server.DebugReport {
	t.Helper()
	resp, err := http.Get("http://" + s.MetricsAddr() + "/debug/verify")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r server.DebugReport
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDebugVerify: with DebugVerify, /debug/verify answers Verify's figures
// and counts its runs; an OUT_OF_MEMORY answer is counted, and counted as
// one with evictable objects present only when an object it could have
// taken was left: without on-demand eviction after finished writes, not
// when every block is write-locked, and with on-demand eviction never.
func TestDebugVerify(t *testing.T) {
	const obj = 1 << 20
	for _, tc := range []struct {
		name          string
		evict, finish bool
		oom, evOOM    uint64
	}{
		{"finished, no eviction", false, true, 1, 1},
		{"all write-locked", false, false, 1, 0},
		{"finished, on-demand eviction", true, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, server.Config{PoolSize: 4 * obj, MetricsAddr: "127.0.0.1:0", DebugVerify: true,
				L1: l1.Config{EvictOnDemand: tc.evict}})
			c := dial(t, s)
			ks := keys("fill", 4)
			res, err := c.ReserveWrite(ks, nil, obj, l1.ModeNew)
			if err != nil {
				t.Fatal(err)
			}
			if tc.finish {
				allOK(t, "FinishWrite")(c.FinishWrite(ks, leasesOf(res)))
			}
			more, err := c.ReserveWrite(keys("more", 2), nil, obj, l1.ModeNew)
			if err != nil {
				t.Fatal(err)
			}
			oom := 0
			for _, r := range more {
				if r.Status == wire.StatusOutOfMemory {
					oom++
				}
			}
			r := debugGet(t, s)
			if len(r.Errors) != 0 || r.Checks != 1 || r.CheckFailures != 0 || r.Conns != 1 {
				t.Fatalf("report %+v", r)
			}
			if r.OOMCalls != tc.oom || r.OOMKeys != uint64(oom) || r.OOMCallsEvictable != tc.evOOM || r.OOMKeysEvictable != tc.evOOM*uint64(oom) {
				t.Fatalf("%d keys OUT_OF_MEMORY; report %+v", oom, r)
			}
			if r.UsedBytes != r.HeldBytes+r.QuarantinedBytes || r.UsedBytes == 0 {
				t.Fatalf("used %d, held %d, quarantined %d", r.UsedBytes, r.HeldBytes, r.QuarantinedBytes)
			}
			resp, err := http.Get("http://" + s.MetricsAddr() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{"kvalloc_daemon_verify_total 1", "go_memstats_heap_inuse_bytes ",
				"kvalloc_daemon_oom_evictable_calls_total " + string(rune('0'+tc.evOOM))} {
				if !strings.Contains(string(body), want) {
					t.Errorf("/metrics lacks %q", want)
				}
			}
		})
	}
}

// TestDebugVerifyOff: without DebugVerify there is no /debug/verify.
func TestDebugVerifyOff(t *testing.T) {
	s := start(t, server.Config{MetricsAddr: "127.0.0.1:0"})
	resp, err := http.Get("http://" + s.MetricsAddr() + "/debug/verify")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/debug/verify without DebugVerify: %s", resp.Status)
	}
}
