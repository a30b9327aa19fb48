//go:build linux

package server

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kvalloc/kvalloc/allocator"
	"github.com/kvalloc/kvalloc/hostmem"
	"github.com/kvalloc/kvalloc/l1"
)

// BenchmarkJournal measures what keeping the index current would cost: a
// journal record per finished key (its index entry and a CRC32C, the
// crash-safe unit) appended to a memfd mapped MAP_SHARED, against the
// floor of the same run, l1's reserve_write + finish_write of the same
// 5700 keys in process (what the daemon does for them before any socket
// cost). A removal would add a shorter record (the key) per evicted or
// deleted object. Both report ns/key.
func BenchmarkJournal(b *testing.B) {
	const n, size = 5700, 256 << 10
	ks := make([]l1.ObjectKey, n)
	for i := range ks {
		ks[i] = l1.ObjectKey{ChunkHash: fmt.Sprintf("%032x", i*2654435761), Model: "meta-llama/Llama-3.1-70B", KVRank: uint32(i % 8)}
	}
	b.Run("op=l1-cycle", func(b *testing.B) {
		r, err := hostmem.NewHeapRegion(2 * n * size)
		if err != nil {
			b.Fatal(err)
		}
		a, err := allocator.New(r, allocator.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		m, err := l1.New[l1.ObjectKey](a, l1.Config{Placement: allocator.Scattered})
		if err != nil {
			b.Fatal(err)
		}
		leases := make([]l1.Lease, n)
		for b.Loop() {
			rs, _ := m.ReserveWrite(ks, nil, size, l1.ModeAll)
			for i := range rs {
				leases[i] = rs[i].Lease
			}
			m.FinishWrite(ks, leases)
			m.Delete(ks, true)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
	})
	b.Run("op=journal", func(b *testing.B) {
		fd, err := unix.MemfdCreate("journal", unix.MFD_CLOEXEC)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(fd)
		const jbytes = 64 << 20
		if err := unix.Ftruncate(fd, jbytes); err != nil {
			b.Fatal(err)
		}
		j, err := unix.Mmap(fd, 0, jbytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Munmap(j)
		objs := make([]l1.Saved[l1.ObjectKey], n)
		for i := range objs {
			objs[i] = l1.Saved[l1.ObjectKey]{Key: ks[i], Block: allocator.Block{Offset: int64(i) * size, Size: size, Gen: uint64(i + 1)}, Size: size}
		}
		var rec []byte
		at := 0
		for b.Loop() {
			for i := range objs {
				rec = encodeIndex(rec[:0], poolIdentity{}, 0, 0, objs[i:i+1], nil, nil)[indexHeader:]
				if at+len(rec)+4 > len(j) {
					at = 0
				}
				at += copy(j[at:], rec)
				binary.LittleEndian.PutUint32(j[at:], crc32.Checksum(rec, castagnoli))
				at += 4
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
	})
}
