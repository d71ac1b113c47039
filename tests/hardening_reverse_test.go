package tests

// Hardening of the reverse bridge: what
// a gateway-held session may accumulate is bounded by bytes, its
// re-subscribes do not amplify, its GET streams are bounded per principal
// and in all, and its per-instance table cannot be flushed into wrong
// answers. This file holds the upstream the attacks run against and the
// client they use; the attacks are in hardening_reverse_*_test.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// listenUpstream is a modern (2026-07-28) server offering resource
// subscriptions and list-changed notifications, written for these tests:
// no published server lets a test count the bytes and the open
// subscriptions/listen streams it receives. Each listen is acknowledged and
// held open until the gateway closes it; Push sends a resource update on
// every open one; Complete ends every open one the graceful way. Its
// server/discover result is cacheable for an hour, so the gateway answers
// initialize without asking again; it names the server in _meta, or, with
// serverInfoInBody, in the result's body, as servers written before the
// final SEP-2575 text do (no published modern server still answers so).
type listenUpstream struct {
	URL string

	serverInfoInBody bool

	listenBytes atomic.Int64 // bodies of subscriptions/listen received
	listens     atomic.Int64 // subscriptions/listen received
	open        atomic.Int64 // listen streams open now
	maxOpen     atomic.Int64 // the most open at once

	mu      sync.Mutex
	last    []string // resourceSubscriptions of the last listen
	streams map[*listenStream]bool
}

type listenStream struct {
	mu   sync.Mutex
	w    http.ResponseWriter
	id   json.RawMessage
	done chan struct{} // closed by Complete
}

func newListenUpstream(t *testing.T) *listenUpstream {
	t.Helper()
	return serveListenUpstream(t, &listenUpstream{})
}

// newLaggingListenUpstream is a listenUpstream with serverInfoInBody.
func newLaggingListenUpstream(t *testing.T) *listenUpstream {
	t.Helper()
	return serveListenUpstream(t, &listenUpstream{serverInfoInBody: true})
}

func serveListenUpstream(t *testing.T, u *listenUpstream) *listenUpstream {
	t.Helper()
	u.streams = map[*listenStream]bool{}
	u.URL = support.Serve(t, u)
	return u
}

// block is the gateway block with u as its only upstream.
func (u *listenUpstream) block() string {
	return "\t\tupstream " + u.URL + " {\n\t\t\tera modern\n\t\t}\n"
}

func (u *listenUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Notifications struct {
				URIs []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		} `json:"params"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &m) != nil || len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch m.Method {
	case "server/discover":
		info := `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"listen-fixture","version":"1"}}`
		if u.serverInfoInBody {
			info = `"serverInfo":{"name":"listen-fixture-lagging","version":"0.9"}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],`+
			`"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true}},%s,"ttlMs":3600000}}`, m.ID, info)
	case "subscriptions/listen":
		u.listenBytes.Add(int64(len(body)))
		u.listens.Add(1)
		u.mu.Lock()
		u.last = m.Params.Notifications.URIs
		u.mu.Unlock()
		// The acknowledgement first: a stream counted open (and so one
		// that Push and Complete write to) has its header and ack out.
		s := &listenStream{w: w, id: m.ID, done: make(chan struct{})}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		s.send(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":` +
			string(m.ID) + `},"notifications":{}}}`)
		u.mu.Lock()
		u.streams[s] = true
		u.mu.Unlock()
		n := u.open.Add(1)
		for old := u.maxOpen.Load(); n > old && !u.maxOpen.CompareAndSwap(old, n); old = u.maxOpen.Load() {
		}
		defer func() {
			u.open.Add(-1)
			u.mu.Lock()
			delete(u.streams, s)
			u.mu.Unlock()
		}()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, m.ID)
	}
}

func (s *listenStream) send(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "data: %s\n\n", msg)
	_ = http.NewResponseController(s.w).Flush()
}

// Push sends notifications/resources/updated of uri on every open listen.
func (u *listenUpstream) Push(uri string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for s := range u.streams {
		s.send(`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":` + fmt.Sprintf("%q", uri) +
			`,"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(s.id) + `}}}`)
	}
}

// Complete ends every open listen with its graceful completion result, as
// a server does when it stops.
func (u *listenUpstream) Complete() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for s := range u.streams {
		s.send(`{"jsonrpc":"2.0","id":` + string(s.id) + `,"result":{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":` +
			string(s.id) + `}}}`)
		close(s.done)
		delete(u.streams, s)
	}
}

// lastHas reports whether the last listen's filter holds exactly uris.
func (u *listenUpstream) lastHas(uris []string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	a, b := slices.Clone(u.last), slices.Clone(uris)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// floodClient sends many small requests over kept-alive connections.
var floodClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

// rpcAnswer is what a request got: its HTTP status, the JSON-RPC error
// code (0: none) and the session id it was given.
type rpcAnswer struct {
	status, code int
	sid          string
}

// heldCall sends a request of session sid (none: "") as principal who (none:
// "") and reads its answer.
func heldCall(url, method, sid, who, body string) (rpcAnswer, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return rpcAnswer{}, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if who != "" {
		req.Header.Set("Authorization", who)
	}
	resp, err := floodClient.Do(req)
	if err != nil {
		return rpcAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := rpcAnswer{status: resp.StatusCode, sid: resp.Header.Get("Mcp-Session-Id")}
	if i := bytes.Index(b, []byte(`"error":{"code":`)); i >= 0 {
		_, _ = fmt.Sscanf(string(b[i+len(`"error":{"code":`):]), "%d", &a.code)
	}
	return a, nil
}

// heldInit initializes a gateway-held session for who and returns its id.
func heldInit(url, who string) (string, error) {
	a, err := heldCall(url, http.MethodPost, "", who, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attacker","version":"1"}}}`)
	if err == nil && (a.status != http.StatusOK || a.sid == "") {
		err = fmt.Errorf("initialize: HTTP %d, code %d", a.status, a.code)
	}
	return a.sid, err
}

// subscribeBody is a resources/subscribe (or unsubscribe) of uri.
func subscribeBody(method, uri string) string {
	return `{"jsonrpc":"2.0","id":2,"method":"resources/` + method + `","params":{"uri":"` + uri + `"}}`
}
