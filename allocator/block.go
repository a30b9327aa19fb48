package allocator

// Block is a handle to allocated memory: an offset into the region and the
// aligned size actually reserved. It holds no pointer, so it may be stored
// anywhere, including in off-heap memory.
type Block struct {
	Offset int64
	Size   int64
}

// End returns the offset one past the block's last byte.
func (b Block) End() int64 { return b.Offset + b.Size }
