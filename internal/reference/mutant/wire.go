package mutant

import (
	"bytes"
	"errors"
	"unsafe"

	"github.com/kvalloc/kvalloc/wire"
)

// Broken frame decoders, each wrapping the real one.

// DropLastKey loses the last key of every keyed request it decodes, as a
// decoder that trusted a count one too small would: its keys no longer
// match the leases, flags and positions that follow them.
type DropLastKey struct{ wire.Decoder }

// DecodeRequest decodes, then drops the last key.
func (d *DropLastKey) DecodeRequest(frame []byte, q *wire.Request) error {
	if err := d.Decoder.DecodeRequest(frame, q); err != nil {
		return err
	}
	if len(q.Keys) > 0 {
		q.Keys = q.Keys[:len(q.Keys)-1]
	}
	return nil
}

// InternalRefusals refuses malformed frames with CodeInternal, a code that
// says the daemon failed, instead of the code that says what is wrong with
// the frame.
type InternalRefusals struct{ wire.Decoder }

// DecodeRequest decodes, turning every refusal into an internal error.
func (d *InternalRefusals) DecodeRequest(frame []byte, q *wire.Request) error {
	return internal(d.Decoder.DecodeRequest(frame, q))
}

// DecodeAnswer likewise.
func (d *InternalRefusals) DecodeAnswer(frame []byte, a *wire.Answer) error {
	return internal(d.Decoder.DecodeAnswer(frame, a))
}

func internal(err error) error {
	var we *wire.Error
	if errors.As(err, &we) {
		return &wire.Error{Code: wire.CodeInternal, Msg: we.Msg}
	}
	return err
}

// BorrowWrites makes the chunk hashes of a reserve_write's keys alias the
// frame, as a borrowing decoder (wire.Decoder.Borrow) would that borrowed
// the keys a manager keeps: they change when the frame's bytes do.
type BorrowWrites struct{ wire.Decoder }

// DecodeRequest decodes, then points each reserve_write key's chunk hash
// at its bytes in the frame.
func (d *BorrowWrites) DecodeRequest(frame []byte, q *wire.Request) error {
	if err := d.Decoder.DecodeRequest(frame, q); err != nil {
		return err
	}
	if q.Type != wire.TypeReserveWrite {
		return nil
	}
	for i := range q.Keys {
		k := &q.Keys[i]
		if at := bytes.Index(frame, []byte(k.ChunkHash)); at >= 0 && len(k.ChunkHash) > 0 {
			k.ChunkHash = unsafe.String(&frame[at], len(k.ChunkHash))
		}
	}
	return nil
}

// HandlesInV1 is a decoder of a version 1 connection that decodes as a
// version 2 one would: it accepts calls by handle (wire.FlagHandles), the
// handles of results and the versions of a hello answer, which version 1
// reserves.
type HandlesInV1 struct{ d wire.Decoder }

// DecodeRequest decodes with version 2's rules.
func (m *HandlesInV1) DecodeRequest(frame []byte, q *wire.Request) error {
	m.d.Version = wire.Version2
	return m.d.DecodeRequest(frame, q)
}

// DecodeAnswer likewise.
func (m *HandlesInV1) DecodeAnswer(frame []byte, a *wire.Answer) error {
	m.d.Version = wire.Version2
	return m.d.DecodeAnswer(frame, a)
}
