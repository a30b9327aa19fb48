package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExampleOnce(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-once", "-pool", "134217728"}, &out))
	for _, want := range []string{
		`kvalloc_allocator_capacity_bytes{pool="example"} 1.34217728e+08`,
		`kvalloc_allocator_failures_total{cause="no_space",pool="example"}`,
		`kvalloc_l1_evictions_total{pool="example",reason="on_demand"}`,
		`kvalloc_l1_objects{pool="example",state="write_locked"}`,
		`kvalloc_allocator_fragmentation_ratio{pool="example"}`,
	} {
		assert.Contains(t, out.String(), want)
	}
	if bytes.Contains(out.Bytes(), []byte("kvalloc_region_")) {
		assert.Contains(t, out.String(), `kvalloc_region_ready_ratio{pool="example"} 1`)
	}
}

func TestExampleLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:9464", "[::1]:9464", "localhost:1"} {
		assert.NoError(t, checkLoopback(addr), addr)
	}
	for _, addr := range []string{"0.0.0.0:9464", ":9464", "10.0.0.1:9464", "example.com:80", "nonsense"} {
		assert.Error(t, checkLoopback(addr), addr)
	}
	err := run(context.Background(), []string{"-addr", ":9464"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "loopback address only")
}
