package legacy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
)

// TestRefusedDropped: a dial that fails is Refused (wrapped, as Open wraps
// it); a connection closed before the answer is Dropped; an HTTP error
// status is neither.
func TestRefusedDropped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Open(context.Background(), NewConnClient(ConnOptions{}), "http://"+addr+"/mcp", http.Header{}, nil, nil, false)
	if !Refused(err) || Dropped(err) {
		t.Fatalf("closed port: %v: Refused %t, Dropped %t", err, Refused(err), Dropped(err))
	}
	for _, err := range []error{io.EOF, fmt.Errorf("initializing upstream session: %w", io.ErrUnexpectedEOF),
		&net.OpError{Op: "read", Err: syscall.ECONNRESET}, &net.OpError{Op: "write", Err: syscall.EPIPE}} {
		if !Dropped(err) || Refused(err) {
			t.Errorf("%v: Dropped %t, Refused %t", err, Dropped(err), Refused(err))
		}
	}
	if err := errors.New("upstream answered 500 Internal Server Error"); Refused(err) || Dropped(err) {
		t.Errorf("an answer counted as a failure to reach the upstream")
	}
}
