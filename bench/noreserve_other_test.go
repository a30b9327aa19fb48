//go:build !linux

package bench

import (
	"errors"

	"github.com/kvalloc/kvalloc/allocator"
)

// newNoReserveRegion needs MAP_NORESERVE; elsewhere the production-size
// benchmarks skip.
func newNoReserveRegion(size int64) (allocator.Region, error) {
	return nil, errors.New("bench: MAP_NORESERVE regions need linux")
}
