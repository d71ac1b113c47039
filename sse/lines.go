package sse

import (
	"bytes"
	"io"
)

// maxEmptyReads is how many consecutive (0, nil) reads are tolerated before
// giving up with io.ErrNoProgress.
const maxEmptyReads = 100

var bom = []byte{0xEF, 0xBB, 0xBF}

// readLine returns the next line without its terminator. The line aliases the
// read buffer and is valid only until the next call. It returns the source's
// error (io.EOF included) once no complete line is left; any unterminated
// remainder stays in buf[rpos:wpos].
func (r *Reader) readLine() ([]byte, error) {
	for {
		if r.rpos < r.wpos {
			if r.skipLF {
				r.skipLF = false
				if r.buf[r.rpos] == '\n' {
					r.rpos++
					continue
				}
			}
			if !r.bomDone && !r.checkBOM() {
				r.fill()
				continue
			}
			b := r.buf[r.rpos:r.wpos]
			// b[:r.scanned] holds no line end: a long line arriving in
			// small reads is scanned once, not once per read.
			if i := lineEnd(b[r.scanned:]); i >= 0 {
				i += r.scanned
				r.scanned = 0
				if i > r.max {
					return nil, ErrEventTooLarge
				}
				r.rpos += i + 1
				if b[i] == '\r' {
					if i+1 < len(b) {
						if b[i+1] == '\n' {
							r.rpos++
						}
					} else {
						r.skipLF = true
					}
				}
				return b[:i], nil
			}
			r.scanned = len(b)
			if len(b) > r.max {
				return nil, ErrEventTooLarge
			}
		}
		if r.srcErr != nil {
			return nil, r.srcErr
		}
		if r.wouldBlock != nil && r.wouldBlock() {
			return nil, ErrWouldBlock
		}
		r.fill()
	}
}

// checkBOM skips a byte order mark at the start of the stream. It reports
// false if it needs more input to decide.
func (r *Reader) checkBOM() bool {
	b := r.buf[r.rpos:r.wpos]
	n := min(len(b), len(bom))
	switch {
	case !bytes.Equal(b[:n], bom[:n]):
	case n == len(bom):
		r.rpos += n
	case r.srcErr == nil:
		return false // a proper prefix of the BOM so far
	}
	r.bomDone = true
	return true
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	lf := bytes.IndexByte(b, '\n')
	head := b
	if lf >= 0 {
		head = b[:lf]
	}
	if cr := bytes.IndexByte(head, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// fill reads more input into buf, compacting or growing it as needed. The
// caller guarantees that the unread part is no larger than r.max, so the
// buffer never grows beyond r.max+1 bytes.
func (r *Reader) fill() {
	if r.buf == nil { // lent back by Release
		r.buf = bufPool.Get().(*[readBufSize]byte)[:]
	}
	if r.rpos > 0 {
		n := copy(r.buf, r.buf[r.rpos:r.wpos])
		r.rpos, r.wpos = 0, n
		if len(r.buf) > readBufSize && n < readBufSize/2 {
			// Release the space a large line needed.
			small := make([]byte, readBufSize)
			copy(small, r.buf[:n])
			r.buf = small
		}
	}
	if r.wpos == len(r.buf) {
		size := min(2*len(r.buf), r.max+1)
		if size <= len(r.buf) { // not reached: readLine enforces the limit first
			size = 2 * len(r.buf)
		}
		grown := make([]byte, size)
		copy(grown, r.buf[:r.wpos])
		r.buf = grown
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.wpos:])
		if n < 0 || n > len(r.buf)-r.wpos {
			panic("sse: source returned an invalid byte count")
		}
		r.wpos += n
		if err != nil {
			r.srcErr = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.srcErr = io.ErrNoProgress
}
