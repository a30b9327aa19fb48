package wire

import (
	"io"
)

// ReadFrame reads one whole frame from r into buf, grown as needed, and
// returns it (header included). The header is checked (ParseHeader) before
// the body is read, so a peer cannot make it allocate more than MaxFrame.
// An io.EOF before the first byte is returned as io.EOF; a frame cut short
// is io.ErrUnexpectedEOF; a bad header is the *Error ParseHeader returns.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	if cap(buf) < HeaderSize {
		buf = make([]byte, 0, 4096)
	}
	buf = buf[:HeaderSize]
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf[:0], err
	}
	return ReadBody(r, buf)
}

// ReadBody reads the rest of a frame whose HeaderSize header is in
// buf[:HeaderSize], into buf grown as needed, and returns the frame.
func ReadBody(r io.Reader, buf []byte) ([]byte, error) {
	h, err := ParseHeader(buf[:HeaderSize])
	if err != nil {
		return buf[:HeaderSize], err
	}
	size := int(h.Size)
	if cap(buf) < size {
		nb := make([]byte, size, min(max(size, 2*cap(buf)), MaxFrame))
		copy(nb, buf[:HeaderSize])
		buf = nb
	}
	buf = buf[:size]
	if _, err := io.ReadFull(r, buf[HeaderSize:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return buf[:HeaderSize], err
	}
	return buf, nil
}
