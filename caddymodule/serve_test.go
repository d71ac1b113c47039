package caddymodule

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestReadBody: a body is read whole, announced or chunked; a body of
// announced length ends in a buffer of its size; nothing is allocated
// ahead of what arrived beyond bodyPrealloc; the limit gives 413.
func TestReadBody(t *testing.T) {
	const limit = 4 << 20
	for _, n := range []int{0, 1, 511, 512, bodyPrealloc, bodyPrealloc + 1, 3 << 20, limit} {
		data := bytes.Repeat([]byte{'['}, n)
		for _, announced := range []bool{true, false} {
			r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(data))
			if announced {
				r.ContentLength = int64(n)
			} else {
				r.Body = io.NopCloser(bytes.NewReader(data)) // no length: as chunked
				r.ContentLength = -1
			}
			body, rerr := readBody(httptest.NewRecorder(), r, limit)
			if rerr != nil || !bytes.Equal(body, data) || body == nil {
				t.Fatalf("%d bytes (announced %v): got %d bytes, %v", n, announced, len(body), rerr)
			}
			if announced && cap(body) > max(n+1, 513) {
				t.Errorf("%d bytes announced: buffer of %d", n, cap(body))
			}
		}
	}

	// A large announced length with nothing sent yet holds bodyPrealloc at
	// most: the first read sees the buffer it was given.
	seen := 0
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.ContentLength = limit
	r.Body = io.NopCloser(readerFunc(func(p []byte) (int, error) {
		if seen == 0 {
			seen = len(p)
		}
		return 0, io.ErrUnexpectedEOF
	}))
	if _, rerr := readBody(httptest.NewRecorder(), r, limit); rerr == nil || rerr.HTTPStatus != http.StatusBadRequest {
		t.Fatalf("a body cut short: %v, want 400", rerr)
	}
	if seen > bodyPrealloc+1 {
		t.Errorf("the first read was offered %d bytes for a body announced at %d, want at most %d", seen, limit, bodyPrealloc+1)
	}

	r = httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(make([]byte, limit+1)))
	if _, rerr := readBody(httptest.NewRecorder(), r, limit); rerr == nil || rerr.HTTPStatus != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %v, want 413", rerr)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
