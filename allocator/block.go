package allocator

// Block is a handle to allocated memory: an offset into the region, the
// aligned size actually reserved, and a generation. It holds no pointer, so
// it may be stored anywhere, including in off-heap memory.
//
// Gen tells apart the blocks that occupy the same offset and size at
// different times. Every block an allocator hands out gets the next
// generation of that allocator, from 1 up (failed calls hand out none), so
// no two handles of one allocator are equal and a zero Gen is never live.
// Free accepts a block only with the generation it was handed out with: a
// handle kept after its block was freed is stale, and freeing it is an
// error wrapping ErrInvalidBlock even when the same offset and size are
// live again under a new owner. Blocks compare with ==.
type Block struct {
	Offset int64
	Size   int64
	Gen    uint64
}

// End returns the offset one past the block's last byte.
func (b Block) End() int64 { return b.Offset + b.Size }
