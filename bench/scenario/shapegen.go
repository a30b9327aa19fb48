package scenario

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// ShapeTrace is what Generate wrote.
type ShapeTrace struct {
	// Conversation is each written request's conversation, in the order
	// of the lines (numbered in order of opening).
	Conversation []int32
	// Conversations is the number of conversations opened; Requests the
	// lines written.
	Conversations, Requests int
	// Blocks is the distinct hash ids; SharedBlocks those of segment
	// items (the rest are private to a conversation).
	Blocks, SharedBlocks int64
	// Refs is the block references; SharedRefs those to segment items.
	Refs, SharedRefs int64
}

// shapeRecord is one request before it is written.
type shapeRecord struct {
	ms      int64
	in, out int64
	ids     []int64
	conv    int32
}

// segKey names a segment item's block after its parent id: the chained
// hash of Mooncake's hash ids.
type segKey struct {
	parent int64
	seg    int32
	item   int32
	block  int32
}

// Generate writes the trace of s to w in the Mooncake JSONL format
// ({"timestamp": ms, "input_length", "output_length", "hash_ids"}), in
// timestamp order (ties in the order generated), and returns what it
// wrote. It is deterministic: one stream, PCG(Seed, 1) as a scenario's
// first stream, draws everything in a fixed order, and each segment
// item's length comes from a hash of (Seed, segment, item).
//
// The model: conversations open as a Poisson process of Rate over Span.
// Each draws its segments in order (one item of segment i with
// probability Share, by Zipf popularity), then Turns requests. Turn 0's
// prompt is the segments' blocks followed by First user tokens; turn k+1's
// is turn k's prompt, its answer (Output tokens) and Next user tokens,
// arriving ThinkMin plus an exponential of mean Think after turn k. Hash
// ids are chained: a segment item's block is named by its parent id and
// its place, so it is shared exactly by prompts that agree up to it; a
// conversation's own full blocks keep their ids from turn to turn, and a
// partial last block gets a new id every turn (once text follows it, it
// is a different block), as the Mooncake trace's ids behave.
//
// With First above one block (BlockTokens), every request but a
// conversation's last turn ends in a block that no other conversation
// has, which lets bench/node's Sessions rule recover the conversations
// exactly from the hash ids.
func (s *Shape) Generate(w io.Writer) (*ShapeTrace, error) {
	if s.BlockTokens < 1 || s.Rate <= 0 || s.Span <= 0 || s.Turns.Lo < 1 {
		return nil, fmt.Errorf("%w: shape %s is incomplete (use ParseShape)", ErrShape, s.Name)
	}
	rng := rand.New(rand.NewPCG(s.Seed, 1))
	zipfs := make([]*rand.Zipf, len(s.Segments))
	for i, seg := range s.Segments {
		if seg.Count > 1 {
			zipfs[i] = rand.NewZipf(rng, seg.Zipf, 1, uint64(seg.Count-1))
		}
	}
	draw := func(r Range) int64 { return int64(r.Lo + rng.IntN(r.Hi-r.Lo+1)) }
	bt := int64(s.BlockTokens)
	shared := map[segKey]int64{}
	next := int64(0)
	var recs []shapeRecord
	var refs, sharedRefs int64
	conv := int32(0)
	for t := 0.0; ; conv++ {
		t += rng.ExpFloat64() / s.Rate
		if t >= s.Span.Seconds() {
			break
		}
		var prefix []int64
		parent := int64(-1)
		for i, seg := range s.Segments {
			if rng.Float64() >= seg.Share {
				continue
			}
			item := 0
			if zipfs[i] != nil {
				item = int(zipfs[i].Uint64())
			}
			n := itemBlocks(s.Seed, i, item, seg.Blocks)
			for b := range n {
				k := segKey{parent, int32(i), int32(item), int32(b)}
				id, ok := shared[k]
				if !ok {
					id = next
					next++
					shared[k] = id
				}
				prefix = append(prefix, id)
				parent = id
			}
		}
		p := int64(len(prefix))
		turns := int(draw(s.Turns))
		var own []int64
		hist := int64(0)
		at := t
		for k := range turns {
			if k == 0 {
				hist += draw(s.First)
			} else {
				hist += draw(s.Next)
			}
			in := p*bt + hist
			out := draw(s.Output)
			full := in / bt
			for int64(len(own)) < full-p {
				own = append(own, next)
				next++
			}
			ids := make([]int64, 0, full+1)
			ids = append(append(ids, prefix...), own[:full-p]...)
			if in%bt != 0 {
				ids = append(ids, next)
				next++
			}
			recs = append(recs, shapeRecord{ms: int64(at * 1000), in: in, out: out, ids: ids, conv: conv})
			refs += int64(len(ids))
			sharedRefs += p
			hist += out
			at += s.ThinkMin.Seconds() + rng.ExpFloat64()*s.Think.Seconds()
			if at*1000 >= float64(time.Duration(1<<62).Milliseconds()) {
				return nil, fmt.Errorf("%w: shape %s: a timestamp overflows", ErrShape, s.Name)
			}
		}
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: shape %s opens no conversation in its span", ErrShape, s.Name)
	}
	slices.SortStableFunc(recs, func(a, b shapeRecord) int {
		switch {
		case a.ms < b.ms:
			return -1
		case a.ms > b.ms:
			return 1
		}
		return 0
	})
	out := &ShapeTrace{Conversations: int(conv), Requests: len(recs), Blocks: next, SharedBlocks: int64(len(shared)), Refs: refs, SharedRefs: sharedRefs}
	bw := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	for _, r := range recs {
		line = append(line[:0], `{"timestamp": `...)
		line = strconv.AppendInt(line, r.ms, 10)
		line = append(line, `, "input_length": `...)
		line = strconv.AppendInt(line, r.in, 10)
		line = append(line, `, "output_length": `...)
		line = strconv.AppendInt(line, r.out, 10)
		line = append(line, `, "hash_ids": [`...)
		for j, id := range r.ids {
			if j > 0 {
				line = append(line, ", "...)
			}
			line = strconv.AppendInt(line, id, 10)
		}
		line = append(line, "]}\n"...)
		if _, err := bw.Write(line); err != nil {
			return nil, err
		}
		out.Conversation = append(out.Conversation, r.conv)
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// itemBlocks is the length of item of segment seg, drawn uniformly from r
// by a hash of (seed, seg, item): the same item always has the same
// length, whatever the order in which conversations draw items.
func itemBlocks(seed uint64, seg, item int, r Range) int {
	x := splitmix(seed ^ splitmix(uint64(seg)<<32|uint64(uint32(item))))
	return r.Lo + int(x%uint64(r.Hi-r.Lo+1))
}

// splitmix is SplitMix64's finalizer, a well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
