package mutant

import (
	"fmt"

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
