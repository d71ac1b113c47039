package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// bodyRecorder is a fixture in front of a real MCP server (the go-sdk
// everything-server): it keeps the body of every POST it passes on, so
// that a test sees whether a request reached the server.
type bodyRecorder struct {
	url    string
	mu     sync.Mutex
	bodies []string
}

func newBodyRecorder(t *testing.T, target string) *bodyRecorder {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rec := &bodyRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	proxy.FlushInterval = -1
	rec.url = support.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			rec.mu.Lock()
			rec.bodies = append(rec.bodies, string(b))
			rec.mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	return rec
}

// sent returns the bodies passed on so far that contain s.
func (rec *bodyRecorder) sent(s string) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []string
	for _, b := range rec.bodies {
		if strings.Contains(b, s) {
			out = append(out, b)
		}
	}
	return out
}

// resourceNotFound checks the answer a server gives a resource it does not
// have, in-band (HTTP 200): code (-32602 modern, -32002 legacy),
// "Resource not found", data.uri.
func resourceNotFound(t *testing.T, x rpcExchange, code int, uri, what string) {
	t.Helper()
	var data struct{ URI string }
	if x.Resp != nil && x.Resp.Error != nil {
		_ = json.Unmarshal(x.Resp.Error.Data, &data)
	}
	if x.Status != http.StatusOK || x.Resp == nil || x.Resp.Error == nil || x.Resp.Error.Code != code || x.Resp.Error.Message != "Resource not found" || data.URI != uri {
		t.Errorf("%s: want %d Resource not found, data.uri %s, got %s", what, code, uri, x)
	}
}

// TestResourceScope: `resource_scope test://static-* ops` and
// `resource_scope test://template/* ops` in front of real go-sdk
// everything-servers (test://static-text, test://static-binary,
// test://watched-resource, the template test://template/{id}/data) of
// each era, and a federated block of both (URIs are not renamed there).
// Real clients (the TypeScript SDK 1.x, legacy, and 2.x, modern, through
// tests/node/fed-tour.mjs) list and read: without ops, the static
// resources and the template are absent from their lists, and reading one
// of them, or a URI the template expands to, is refused as a resource no
// server has (-32002 to the legacy client, -32602 to the modern one, the
// URI in data.uri), as is subscribing to one (resources/subscribe,
// subscriptions/listen); the watched resource is listed and read. With
// ops everything is listed and read. Raw attacks: a modern read whose
// Mcp-Name names an allowed URI, a legacy read repeating uri (the
// forbidden one last), resources/unsubscribe, a completion of the
// template, the REST face's lists and bytes, and a legacy session's read
// on another instance of a fleet than the one that opened it. Lists say
// cacheScope private. No upstream ever receives a request naming a
// refused URI.
func TestResourceScope(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	legacy, modern := newBodyRecorder(t, startGoEverything(t, false)), newBodyRecorder(t, startGoEverything(t, true))
	const rules = "\t\t\tresource_scope test://static-* ops\n\t\t\tresource_scope test://template/* ops"
	const template = "test://template/{id}/data"
	for _, c := range []struct{ name, block string }{
		{"modern", "\t\tupstream " + modern.url},
		{"legacy", "\t\tupstream " + legacy.url + "\n\t\trest /api\n\t\tstate_key " + testKey(fleetKeyByte)},
		{"federated", "\t\tserver old {\n\t\t\tupstream " + legacy.url + "\n\t\t}\n\t\tserver new {\n\t\t\tupstream " + modern.url + "\n\t\t}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := freePort(t)
			admin, audience := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
			g := launchCaddyfile(t, port, admin, scopeCaddyfile(a, port, admin, t.TempDir(), audience, c.block, rules))
			mint := func(sub, scope string) string {
				return a.mint(t, map[string]any{"sub": sub, "aud": audience, "scope": scope}, nil, 600)
			}
			bob, alice := mint("bob", "mcp"), mint("alice", "mcp ops")

			// Real clients of each era.
			tour := func(flavour string, plan map[string]any) tourOutcome {
				b, _ := json.Marshal(plan)
				out, err := runNodeScript(t, "fed-tour.mjs", flavour, g.URL, string(b))
				if err != nil {
					t.Fatalf("fed-tour.mjs %s: %v", flavour, err)
				}
				var got tourOutcome
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("fed-tour.mjs %s: %v: %s", flavour, err, out)
				}
				return got
			}
			for _, flavour := range []string{"legacy", "modern"} {
				code, subscribe := -32602, map[string]any{"method": "subscriptions/listen", "params": map[string]any{"resourceSubscriptions": []string{"test://static-binary"}}}
				if flavour == "legacy" {
					code, subscribe = -32002, map[string]any{"method": "resources/subscribe", "params": map[string]any{"uri": "test://static-binary"}}
				}
				got := tour(flavour, map[string]any{"bearer": bob, "reads": []string{"test://watched-resource"}, "refused": []map[string]any{
					{"method": "resources/read", "params": map[string]any{"uri": "test://static-binary"}},
					{"method": "resources/read", "params": map[string]any{"uri": "test://template/666/data"}},
					subscribe,
				}})
				if !slices.Contains(got.Resources, "test://watched-resource") || slices.ContainsFunc(got.Resources, func(u string) bool { return strings.HasPrefix(u, "test://static-") }) ||
					slices.Contains(got.Templates, template) {
					t.Errorf("%s client without ops lists %v and templates %v", flavour, got.Resources, got.Templates)
				}
				if len(got.Reads) != 1 || len(got.Reads[0].Result.Contents) == 0 {
					t.Errorf("%s client without ops reading test://watched-resource: %+v", flavour, got.Reads)
				}
				for i, uri := range []string{"test://static-binary", "test://template/666/data", "test://static-binary"} {
					var data struct{ URI string }
					if i < len(got.Refused) {
						_ = json.Unmarshal(got.Refused[i].Data, &data)
					}
					if i >= len(got.Refused) || got.Refused[i].Code != code || data.URI != uri {
						t.Errorf("%s client without ops, refused %d (%s): want %d, got %+v", flavour, i, uri, code, got.Refused)
					}
				}
				got = tour(flavour, map[string]any{"bearer": alice, "reads": []string{"test://static-text", "test://template/7/data"}})
				if !slices.Contains(got.Resources, "test://static-text") || !slices.Contains(got.Resources, "test://static-binary") || !slices.Contains(got.Templates, template) {
					t.Errorf("%s client with ops lists %v and templates %v", flavour, got.Resources, got.Templates)
				}
				if len(got.Reads) != 2 || len(got.Reads[0].Result.Contents) == 0 || len(got.Reads[1].Result.Contents) == 0 {
					t.Errorf("%s client with ops reading: %+v", flavour, got.Reads)
				}
			}

			// Lists by hand: private, per token.
			bobHdr := map[string]string{"Authorization": "Bearer " + bob}
			list := func(token, method string) ([]string, string) {
				h := withHeaders(modernHeaders(modernVersion, method, ""), "Authorization", "Bearer "+token)
				x := postRPC(t, g.URL, h, rpcBody(t, 1, method, map[string]any{"_meta": meta(modernVersion)}), 1)
				var res struct {
					CacheScope        string
					Resources         []struct{ URI string }
					ResourceTemplates []struct{ URITemplate string }
				}
				if x.Resp == nil || json.Unmarshal(x.Resp.Result, &res) != nil {
					t.Fatalf("%s: %s", method, x)
				}
				var uris []string
				for _, r := range res.Resources {
					uris = append(uris, r.URI)
				}
				for _, r := range res.ResourceTemplates {
					uris = append(uris, r.URITemplate)
				}
				return uris, res.CacheScope
			}
			for _, token := range []string{bob, alice, bob} {
				uris, scope := list(token, "resources/list")
				if slices.Contains(uris, "test://static-text") != (token == alice) || !slices.Contains(uris, "test://watched-resource") || scope != "private" {
					t.Errorf("resources/list (alice: %v): cacheScope %q, %v", token == alice, scope, uris)
				}
				templates, scope := list(token, "resources/templates/list")
				if slices.Contains(templates, template) != (token == alice) || scope != "private" {
					t.Errorf("resources/templates/list (alice: %v): cacheScope %q, %v", token == alice, scope, templates)
				}
			}

			// Attacks, each refused before any upstream.
			read := withHeaders(modernHeaders(modernVersion, "resources/read", "test://watched-resource"), "Authorization", bobHdr["Authorization"])
			resourceNotFound(t, postRPC(t, g.URL, read, rpcBody(t, 2, "resources/read", withMeta(map[string]any{"uri": "test://static-binary"})), 2),
				-32602, "test://static-binary", "Mcp-Name naming an allowed URI over a body naming a forbidden one")
			complete := withHeaders(modernHeaders(modernVersion, "completion/complete", ""), "Authorization", bobHdr["Authorization"])
			resourceNotFound(t, postRPC(t, g.URL, complete, rpcBody(t, 3, "completion/complete", withMeta(map[string]any{
				"ref": map[string]any{"type": "ref/resource", "uri": template}, "argument": map[string]any{"name": "id", "value": "6"},
			})), 3), -32602, template, "a completion of the forbidden template")
			init := post(t, g.URL, bobHdr, legacyInit)
			sid := init.Header.Get("Mcp-Session-Id")
			init.Body.Close()
			session := withHeaders(legacyHeaders(sid), "Authorization", bobHdr["Authorization"])
			if r := post(t, g.URL, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); sid == "" || r.StatusCode != http.StatusAccepted {
				t.Fatalf("legacy session %q: %d", sid, r.StatusCode)
			}
			resourceNotFound(t, postRPC(t, g.URL, session, `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"test://watched-resource","uri":"test://static-binary"}}`, 4),
				-32002, "test://static-binary", "a legacy read repeating uri")
			resourceNotFound(t, postRPC(t, g.URL, session, `{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"test://static-binary"}}`, 5),
				-32002, "test://static-binary", "a legacy unsubscribe")
			if x := postRPC(t, g.URL, session, `{"jsonrpc":"2.0","id":6,"method":"resources/read","params":{"uri":"test://watched-resource"}}`, 6); x.Resp == nil || x.Resp.Error != nil {
				t.Errorf("bob's legacy read of test://watched-resource: %s", x)
			}

			if c.name == "legacy" { // the REST face
				base := fmt.Sprintf("http://127.0.0.1:%d/api", g.Port)
				if r := restDo(t, "GET", base+"/resources", bobHdr, ""); r.Status != 200 || strings.Contains(string(r.Body), "static-") || !strings.Contains(string(r.Body), "watched-resource") ||
					!strings.HasPrefix(r.Header.Get("Cache-Control"), "private") {
					t.Errorf("bob's REST resources: %d %q %s", r.Status, r.Header.Get("Cache-Control"), r.Body)
				}
				if r := restDo(t, "GET", base+"/resources-templates", bobHdr, ""); r.Status != 200 || strings.Contains(string(r.Body), "test://template/") {
					t.Errorf("bob's REST resource templates: %d %s", r.Status, r.Body)
				}
				wantProblem(t, restDo(t, "GET", base+"/resources/static-binary", bobHdr, ""), http.StatusNotFound)
				if r := restDo(t, "GET", base+"/resources/static-text", map[string]string{"Authorization": "Bearer " + alice}, ""); r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
					t.Errorf("alice's REST resource static-text: %d %q", r.Status, r.Header.Get("Content-Type"))
				}
			}
		})
	}
	// A fleet of two in front of the modern server: a legacy client's
	// session (the reverse bridge's) opened on one instance and used on
	// the other, which serves it from its sealed id (a read has no owner
	// to be relayed to: only parked calls are). Its read without ops is
	// refused there; with ops it is answered.
	ports := []int{freePort(t), freePort(t)}
	audience := fmt.Sprintf("http://127.0.0.1:%d/mcp", ports[0])
	fleet := make([]*gateway, len(ports))
	for i, port := range ports {
		admin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		fleet[i] = launchCaddyfile(t, port, admin, scopeCaddyfile(a, port, admin, t.TempDir(), audience, fleetBlock(t, "\t\tupstream "+modern.url, "peer", ports, i), rules))
	}
	as := func(scope string, hdr map[string]string) map[string]string {
		return withHeaders(hdr, "Authorization", "Bearer "+a.mint(t, map[string]any{"sub": "carol", "aud": audience, "scope": scope}, nil, 600))
	}
	init := post(t, fleet[0].URL, as("mcp ops", nil), legacyInit)
	sid := init.Header.Get("Mcp-Session-Id")
	init.Body.Close()
	if r := post(t, fleet[0].URL, as("mcp ops", legacyHeaders(sid)), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); sid == "" || r.StatusCode != http.StatusAccepted {
		t.Fatalf("legacy session %q: %d", sid, r.StatusCode)
	}
	resourceNotFound(t, postRPC(t, fleet[1].URL, as("mcp", legacyHeaders(sid)), `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"test://static-binary"}}`, 2),
		-32002, "test://static-binary", "carol's read without ops on the other instance")
	if x := postRPC(t, fleet[1].URL, as("mcp ops", legacyHeaders(sid)), `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"test://static-text"}}`, 3); x.Resp == nil || x.Resp.Error != nil {
		t.Errorf("carol's read with ops on the other instance: %s", x)
	}

	// Alice read test://static-text and test://template/7/data: the
	// upstreams saw those; never what was refused.
	for _, rec := range []*bodyRecorder{legacy, modern} {
		for _, s := range []string{"test://static-binary", "test://template/666/data", `"ref/resource"`, `"resources/unsubscribe"`} {
			if sent := rec.sent(s); len(sent) > 0 {
				t.Errorf("an upstream received %d requests naming %s: %s", len(sent), s, sent[0])
			}
		}
	}
	if sent := modern.sent("test://static-text"); len(sent) == 0 {
		t.Error("the modern upstream never received alice's read of test://static-text (the recorder sees nothing?)")
	}
}

// TestResourceScopeUpdates: a subscription made with the scope does not
// outlive it. Two legacy sessions of one subject through the pass-through
// to the go-sdk everything-server (which updates test://watched-resource
// every 3 s to its subscribers), each subscribed with `watch` (the scope
// `resource_scope test://watched-* watch` asks); one's GET stream is
// opened with a token without `watch`, the other's with it. By the time
// the second has had two updates, the first has had none.
func TestResourceScopeUpdates(t *testing.T) {
	t.Parallel()
	a := startAuthServer(t)
	up := startGoEverything(t, false)
	port := freePort(t)
	admin, audience := fmt.Sprintf("127.0.0.1:%d", freePort(t)), fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	g := launchCaddyfile(t, port, admin, scopeCaddyfile(a, port, admin, t.TempDir(), audience, "\t\tupstream "+up, "\t\t\tresource_scope test://watched-* watch"))
	as := func(scope string, hdr map[string]string) map[string]string {
		return withHeaders(hdr, "Authorization", "Bearer "+a.mint(t, map[string]any{"sub": "carol", "aud": audience, "scope": scope}, nil, 600))
	}
	subscribed := func() string {
		init := post(t, g.URL, as("mcp watch", nil), legacyInit)
		sid := init.Header.Get("Mcp-Session-Id")
		init.Body.Close()
		if r := post(t, g.URL, as("mcp watch", legacyHeaders(sid)), `{"jsonrpc":"2.0","method":"notifications/initialized"}`); sid == "" || r.StatusCode != http.StatusAccepted {
			t.Fatalf("legacy session %q: %d", sid, r.StatusCode)
		}
		x := postRPC(t, g.URL, as("mcp watch", legacyHeaders(sid)), `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"test://watched-resource"}}`, 2)
		if x.Resp == nil || x.Resp.Error != nil {
			t.Fatalf("subscribing with watch: %s", x)
		}
		return sid
	}
	// stream opens sid's GET stream with a token of scope and counts the
	// updates it carries.
	stream := func(sid, scope string, updates *atomic.Int32) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
		for k, v := range as(scope, withHeaders(legacyHeaders(sid), "Accept", "text/event-stream")) {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET stream with %q: %v %v", scope, resp, err)
		}
		go func() {
			defer resp.Body.Close()
			for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
				if strings.Contains(sc.Text(), "notifications/resources/updated") {
					updates.Add(1)
				}
			}
		}()
	}
	var without, with atomic.Int32
	stream(subscribed(), "mcp", &without)
	stream(subscribed(), "mcp watch", &with)
	poll(15*time.Second, func() bool { return with.Load() >= 2 })
	if with.Load() < 2 || without.Load() != 0 {
		t.Errorf("updates on the stream with watch: %d (want 2), without: %d (want 0)", with.Load(), without.Load())
	}
}
