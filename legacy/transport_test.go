package legacy

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// countingDoer is an *http.Client that counts the requests it sends.
type countingDoer struct {
	n atomic.Int32
	c *http.Client
}

func (d *countingDoer) Do(req *http.Request) (*http.Response, error) {
	d.n.Add(1)
	return d.c.Do(req)
}

// TestConnClientDial: a ConnClient with Dial opens its connections with
// it (the dialer of a configured transport), and reports its failure as
// it is.
func TestConnClientDial(t *testing.T) {
	srv, _ := countingServer(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	var dials atomic.Int32
	var d net.Dialer
	c := NewConnClient(ConnOptions{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}})
	defer c.CloseIdleConnections()
	for range 2 {
		if got := readAll(t, post(t, c, context.Background(), srv.URL, "{}")); got != "ok" {
			t.Fatalf("answer %q", got)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("Dial called %d times, want 1 (the second request reuses the connection)", n)
	}

	refused := NewConnClient(ConnOptions{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: context.DeadlineExceeded}
	}})
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	if _, err := refused.Do(req); !Refused(err) {
		t.Fatalf("error %v: want a refused connection", err)
	}
}

// TestPoolKeyClient: a lease whose key names a client opens its session
// with that client, and sessions of different clients are never shared.
func TestPoolKeyClient(t *testing.T) {
	server, url := goSDKServer(t)
	a, b := &countingDoer{c: &http.Client{}}, &countingDoer{c: &http.Client{}}
	p := NewPool(PoolOptions{MaxSessions: 10, IdleTimeout: time.Minute, Client: http.DefaultClient})
	defer p.Close()
	ctx := context.Background()
	key := func(d Doer) PoolKey { return PoolKey{Upstream: url, Principal: "p", Caps: "{}", Client: d} }
	lease := func(d Doer) *Session {
		s, err := p.Lease(ctx, key(d), nil, []byte("{}"), nil, LeaseLimits{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sa := lease(a)
	if a.n.Load() == 0 {
		t.Fatal("the session was not opened with the key's client")
	}
	p.Release(key(a), sa, true)
	sb := lease(b)
	if sb == sa {
		t.Fatal("a session opened with one client was leased for another")
	}
	if b.n.Load() == 0 {
		t.Fatal("the second session was not opened with its key's client")
	}
	p.Release(key(b), sb, true)
	again := lease(a)
	p.Release(key(a), again, true)
	if again != sa {
		t.Fatal("the idle session of the same client was not reused")
	}
	waitSessions(t, server, 2)
}
