package legacy

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

func idleCount(c *ConnClient) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.idle {
		n += len(l)
	}
	return n
}

// waitFor polls cond until it holds or 5s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConnClientSpares(t *testing.T) {
	url, conns := streamServer(t)
	c := NewConnClient(ConnOptions{Spares: 2})
	defer c.CloseIdleConnections()
	var streams []*http.Response
	for range 3 {
		streams = append(streams, post(t, c, context.Background(), url, "{}"))
	}
	for _, s := range streams {
		s.Body.Close() // let go mid-answer: the connection cannot be reused
	}
	// Three closed, two replaced (Spares), none more.
	waitFor(t, "two spares", func() bool { return idleCount(c) == 2 })
	waitFor(t, "five connections (three streams, two spares)", func() bool { return conns() == 5 })
	// The next two requests, held at once, take the spares: no dial.
	a := post(t, c, context.Background(), url, "{}")
	b := post(t, c, context.Background(), url, "{}")
	if n := conns(); n != 5 {
		t.Fatalf("%d connections after two requests, want 5 (the spares used)", n)
	}
	a.Body.Close()
	b.Body.Close()
	waitFor(t, "the used spares replaced", func() bool { return idleCount(c) == 2 })

	// A stream read to its end, or a request with no stream, needs no spare.
	readAll(t, post(t, c, context.Background(), url+"/x", "{}"))
	if n := idleCount(c); n != 2 {
		t.Fatalf("%d idle, want 2", n)
	}
}

func TestConnClientNoSparesByDefault(t *testing.T) {
	url, conns := streamServer(t)
	c := NewConnClient(ConnOptions{})
	post(t, c, context.Background(), url, "{}").Body.Close()
	readAll(t, post(t, c, context.Background(), url+"/x", "{}"))
	if n := conns(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// A spare whose dial ends after CloseIdleConnections is closed, not kept.
func TestConnClientSpareAcrossCloseIdle(t *testing.T) {
	url, _ := streamServer(t)
	hold := make(chan struct{})
	dialed := make(chan net.Conn, 4)
	d := &net.Dialer{}
	dials := 0
	c := NewConnClient(ConnOptions{Spares: 1, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials++
		nc, err := d.DialContext(ctx, network, addr)
		if dials > 1 { // the spare
			<-hold
			dialed <- nc
		}
		return nc, err
	}})
	post(t, c, context.Background(), url, "{}").Body.Close()
	c.CloseIdleConnections()
	close(hold)
	nc := <-dialed
	// A closed connection refuses even a deadline.
	waitFor(t, "the late spare closed", func() bool { return nc.SetReadDeadline(time.Time{}) != nil })
	if n := idleCount(c); n != 0 {
		t.Fatalf("%d idle after CloseIdleConnections, want 0", n)
	}
}
