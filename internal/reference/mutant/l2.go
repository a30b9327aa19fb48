package mutant

import (
	"fmt"
	"io"
	"math"

	"github.com/kvalloc/kvalloc/l1"
	"github.com/kvalloc/kvalloc/l2"
)

// L2SkipChecksum is an L2 value decoder (l2.Options.Decode) that checks a
// value's header, key and length but not its payload's checksum: it
// serves a value whose payload bytes were changed in the store, the
// silent wrong byte a remote tier must never hand out.
func L2SkipChecksum(k *l1.ObjectKey, v []byte) ([]byte, error) {
	h, err := l2.DecodeHeader(k, v)
	if err != nil {
		return nil, err
	}
	n := l2.PrefixLen(k)
	if int64(len(v)-n) != h.Size {
		return nil, fmt.Errorf("%w: payload of %d bytes, the header says %d", l2.ErrCorrupt, len(v)-n, h.Size)
	}
	return v[n:], nil
}

// RESPNoBound is an l2.RESPReader maker that ignores its bound: it
// accepts a bulk of any length a peer announces, so a peer that claims a
// huge reply makes its reader wait for, or its caller make room for,
// bytes no piece has.
func RESPNoBound(r io.Reader, _ int64) *l2.RESPReader { return l2.NewRESPReader(r, math.MaxInt64) }
