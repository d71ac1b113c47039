package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDeadlineWriter: writing to a client that does not read fails once a
// write has blocked for the timeout.
func TestDeadlineWriter(t *testing.T) {
	failed := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		dw := newDeadlineWriter(w, 200*time.Millisecond)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := dw.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL) // never read
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("write failed with %v, want a timeout", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a write to a client that does not read still blocks after 20s")
	}
}
