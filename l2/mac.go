package l2

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// MinSecret is the shortest MAC secret NewSecret takes, in bytes.
const MinSecret = 32

// MACSize is the size of each of a value's two MACs (HMAC-SHA-256).
const MACSize = sha256.Size

// Secret is one MAC key of the value format: the secret the nodes that
// share an L2 share, and what is derived from it. Its ID, which every value
// it authenticates carries, is derived from the secret too, so that the
// operator names no ids: a rotation is a new secret file beside the old.
type Secret struct {
	id                   uint32
	value, header, piece sync.Pool // *macHash, keyed with the derived keys
}

// macHash is a pooled HMAC and its sum's buffer.
type macHash struct {
	h   hash.Hash
	sum [MACSize]byte
}

// derive is HMAC-SHA-256(secret, label): the separate keys of the value
// MAC, the header MAC, the pieces' keys (pieces.go) and the id, so that
// no MAC of one kind is ever a MAC of another.
func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// NewSecret makes a Secret of b (at least MinSecret bytes; the caller
// may reuse b).
func NewSecret(b []byte) (*Secret, error) {
	if len(b) < MinSecret {
		return nil, fmt.Errorf("l2: a MAC secret of %d bytes: want at least %d (e.g. head -c 32 /dev/urandom | base64)", len(b), MinSecret)
	}
	s := &Secret{id: binary.LittleEndian.Uint32(derive(b, "kvl2 key id"))}
	if s.id == 0 {
		s.id = 1 // 0 is a value without a MAC
	}
	kv, kh, kp := derive(b, "kvl2 value mac"), derive(b, "kvl2 header mac"), derive(b, "kvl2 piece key")
	s.value.New = func() any { return &macHash{h: hmac.New(sha256.New, kv)} }
	s.header.New = func() any { return &macHash{h: hmac.New(sha256.New, kh)} }
	s.piece.New = func() any { return &macHash{h: hmac.New(sha256.New, kp)} }
	return s, nil
}

// ID is the key id the values this secret authenticates carry; never 0.
func (s *Secret) ID() uint32 { return s.id }

func (s *Secret) get(p *sync.Pool) *macHash {
	m := p.Get().(*macHash)
	m.h.Reset()
	return m
}

// Codec encodes and checks values (the format in codec.go). A Codec
// with a write secret writes values authenticated by it and accepts only
// values with a MAC of one of its secrets; the unauthenticated Codec (nil
// write secret; the package's Encode and Decode) writes values without
// MACs (key id 0) and accepts only those. A value of another key id or
// another format version is ErrForeign: not served, and not the caller's
// to delete (another node's, with other secrets or another version).
type Codec struct {
	write *Secret
	read  []*Secret // write first
	// skipMAC is a test's deliberate bug: the MACs are not checked.
	skipMAC bool
}

// Unauthenticated is the Codec without a secret: values without MACs,
// checked by their checksums alone, which anyone who can write to the
// store can forge.
var Unauthenticated = &Codec{}

// NewCodec returns a Codec that writes with write and reads values of
// write or of any of old (the secrets of a rotation: the new one writes
// while values of the old ones are still read). write must not be nil,
// and no two secrets may share an id.
func NewCodec(write *Secret, old ...*Secret) (*Codec, error) {
	if write == nil {
		return nil, errors.New("l2: NewCodec without a write secret (Unauthenticated is the codec without one)")
	}
	c := &Codec{write: write, read: []*Secret{write}}
	for _, s := range old {
		if s == nil {
			continue
		}
		for _, r := range c.read {
			if r.id == s.id {
				return nil, fmt.Errorf("l2: two MAC secrets of key id %#x (the same secret twice?)", s.id)
			}
		}
		c.read = append(c.read, s)
	}
	return c, nil
}

// KeyID is the key id of the values c writes (0: no MAC).
func (c *Codec) KeyID() uint32 {
	if c.write == nil {
		return 0
	}
	return c.write.id
}

// Authenticated reports whether c writes and requires MACs.
func (c *Codec) Authenticated() bool { return c.write != nil }

// secret is the read secret of id, or nil.
func (c *Codec) secret(id uint32) *Secret {
	for _, s := range c.read {
		if s.id == id {
			return s
		}
	}
	return nil
}

// pieceGMACSize is the piece MAC's used bytes (pieces.go): the GMAC's
// nonce and tag.
const pieceGMACSize = 12 + 16

// pieceGCM is the GMAC of one piece: AES-256-GCM under the piece's own
// key, HMAC-SHA-256 of its header's fields (bytes [0, 48)) and
// its key kb under the secret's piece key, so that no two pieces share a
// key unless they share every field, the object id of their put
// included; with a random nonce (NewGCMWithRandomNonce, which FIPS
// 140-only mode allows too).
func (s *Secret) pieceGCM(fields, kb []byte) (cipher.AEAD, error) {
	blk, err := s.pieceCipher(fields, kb)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCMWithRandomNonce(blk)
}

// pieceCipher is the AES-256 block cipher of the piece key of the piece
// whose header's fields are fields and whose key is kb.
func (s *Secret) pieceCipher(fields, kb []byte) (cipher.Block, error) {
	m := s.get(&s.piece)
	defer s.piece.Put(m)
	m.h.Write(fields)
	m.h.Write(kb)
	return aes.NewCipher(m.h.Sum(m.sum[:0]))
}

// pieceMAC writes the piece MAC of payload p (the GMAC of p as
// additional data, nothing encrypted: its nonce and tag) into out
// (pieceGMACSize bytes at least).
func (s *Secret) pieceMAC(fields, kb, p, out []byte) error {
	g, err := s.pieceGCM(fields, kb)
	if err != nil {
		return err
	}
	copy(out, g.Seal(out[:0:0], nil, nil, p))
	return nil
}

// pieceMACOK reports whether mac (the nonce and tag) is payload p's
// piece MAC.
func (s *Secret) pieceMACOK(fields, kb, p, mac []byte) bool {
	g, err := s.pieceGCM(fields, kb)
	if err != nil {
		return false
	}
	_, err = g.Open(nil, nil, mac[:pieceGMACSize], p)
	return err == nil
}
