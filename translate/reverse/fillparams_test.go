package reverse

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestFillParamHeaders: a modern client's tools/call gets the Mcp-Param-*
// headers its tool's annotations ask for and it lacks, read from the
// upstream's tools/list once (with the client's credentials) and kept; a
// header the client sent is left as it is.
func TestFillParamHeaders(t *testing.T) {
	var lists atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if gjson.GetBytes(body, "method").Str != "tools/list" || r.Header.Get("Mcp-Method") != "tools/list" || r.Header.Get("Authorization") != "Bearer t" {
			t.Errorf("upstream got %s %v", body, r.Header)
		}
		lists.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+gjson.GetBytes(body, "id").Raw+`,"result":{"resultType":"complete","tools":[`+
			`{"name":"deploy","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"dry":{"type":"boolean","x-mcp-header":"Dry-Run"}}}},`+
			`{"name":"plain","inputSchema":{"type":"object"}}],"ttlMs":60000,"cacheScope":"private"}}`)
	}))
	defer up.Close()
	rv := New(up.Client(), DefaultOptions())
	creds := http.Header{"Authorization": {"Bearer t"}}
	fill := func(hdr http.Header, tool, args string) int {
		return rv.FillParamHeaders(context.Background(), nil, up.URL, [16]byte{1}, creds, hdr, tool, []byte(args))
	}

	hdr := http.Header{}
	if n := fill(hdr, "deploy", `{"region":"eu-west","dry":true}`); n != 2 || hdr.Get("Mcp-Param-Region") != "eu-west" || hdr.Get("Mcp-Param-Dry-Run") != "true" {
		t.Errorf("set %d: %v", n, hdr)
	}
	hdr = http.Header{"Mcp-Param-Region": {"us-east"}}
	if n := fill(hdr, "deploy", `{"region":"eu-west","dry":false}`); n != 1 || hdr.Get("Mcp-Param-Region") != "us-east" || hdr.Get("Mcp-Param-Dry-Run") != "false" {
		t.Errorf("a header the client sent: set %d: %v", n, hdr)
	}
	hdr = http.Header{}
	if n := fill(hdr, "plain", `{"region":"eu-west"}`); n != 0 || len(hdr) != 0 {
		t.Errorf("a tool without annotations: set %d: %v", n, hdr)
	}
	if n := lists.Load(); n != 1 {
		t.Errorf("tools/list asked %d times, want once", n)
	}
	key := up.URL + "\x00" + string([]byte{1, 15: 0})
	if _, ok := rv.toolLists.get(key, time.Now().Add(59*time.Second)); !ok {
		t.Error("the annotations were not kept for the list's ttlMs")
	}
}

// TestFillParamHeadersUpstreamFails: a tools/list that fails leaves no
// annotations, and is asked again a minute on, not an hour (a call to an
// annotated tool gets the upstream's -32020 meanwhile).
func TestFillParamHeadersUpstreamFails(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer up.Close()
	rv := New(up.Client(), DefaultOptions())
	hdr := http.Header{}
	if n := rv.FillParamHeaders(context.Background(), nil, up.URL, [16]byte{2}, nil, hdr, "deploy", []byte(`{"region":"eu"}`)); n != 0 || len(hdr) != 0 {
		t.Fatalf("set %d: %v", n, hdr)
	}
	key := up.URL + "\x00" + string([]byte{2, 15: 0})
	if _, ok := rv.toolLists.get(key, time.Now()); !ok {
		t.Fatal("the failed read was not kept at all")
	}
	if _, ok := rv.toolLists.get(key, time.Now().Add(minToolListTTL+time.Second)); ok {
		t.Error("the failed read was kept past a minute")
	}
}
