package translate

import (
	"bufio"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// requestURL parses a request target as the Go server does.
func requestURL(t testing.TB, target string) *url.URL {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST " + target + " HTTP/1.1\r\nHost: gw\r\n\r\n")))
	if err != nil {
		t.Skipf("the server refuses %q: %v", target, err)
	}
	return req.URL
}

func TestForwardURL(t *testing.T) {
	for target, want := range map[string]string{
		"/mcp":                 "http://10.0.0.1:8080/mcp",
		"/mcp?x=1&y=%20":       "http://10.0.0.1:8080/mcp?x=1&y=%20",
		"/a%2Fb/mcp":           "http://10.0.0.1:8080/a%2Fb/mcp",
		"//evil.example/steal": "http://10.0.0.1:8080//evil.example/steal", // a path on the owner
		"/@evil:1/x":           "http://10.0.0.1:8080/@evil:1/x",
	} {
		got, err := ForwardURL("http://10.0.0.1:8080", requestURL(t, target))
		if err != nil || got.String() != want {
			t.Errorf("ForwardURL(%q) = %v, %v; want %s", target, got, err, want)
		}
	}
	for _, target := range []string{
		"http:@127.0.0.1:19999/steal", // an open relay, found once and fixed
		"http://127.0.0.1:19999/steal",
		"http://10.0.0.1:8080@127.0.0.1:19999/steal",
		"127.0.0.1:19999",
		"*",
		"/mcp?x#y", // the query would end at '#' once the URL is written out
	} {
		if got, err := ForwardURL("http://10.0.0.1:8080", requestURL(t, target)); err == nil {
			t.Errorf("ForwardURL(%q) = %v, want an error", target, got)
		}
	}
	for _, base := range []string{"", "10.0.0.1:8080", "ftp://h", "http://u@h", "http://h/p", "http://h?q", "http:opaque"} {
		if got, err := ForwardURL(base, requestURL(t, "/mcp")); err == nil {
			t.Errorf("ForwardURL(base %q) = %v, want an error", base, got)
		}
	}
}

// FuzzForwardURL: whatever request target a client sends and whatever
// owner address the fleet holds, a URL ForwardURL builds goes to the
// owner's scheme and host, carries no userinfo, and its request line is a
// path.
func FuzzForwardURL(f *testing.F) {
	for _, seed := range [][2]string{
		{"http://10.0.0.1:8080", "/mcp"},
		{"http://10.0.0.1:8080", "http:@127.0.0.1:19999/steal"},
		{"https://gw.example", "//evil/x?y#z"},
		{"http://[::1]:9", "/a%2F..%2Fb?q=%00"},
		{"http://h:1", "http://u:p@evil:2/x"},
		{"http://h:1/", "@evil/x"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, base, target string) {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST " + target + " HTTP/1.1\r\nHost: gw\r\n\r\n")))
		if err != nil {
			return
		}
		out, err := ForwardURL(base, req.URL)
		if err != nil {
			return
		}
		b, err := url.Parse(base)
		if err != nil {
			t.Fatalf("forwardURL accepted the unparsable base %q", base)
		}
		if out.Scheme != b.Scheme || out.Host != b.Host || out.User != nil {
			t.Fatalf("base %q, target %q: built %q, whose scheme and host are not the owner's", base, target, out)
		}
		// What the transport will send: the request line and the host.
		again, err := url.Parse(out.String())
		if err != nil || again.Scheme != b.Scheme || again.Host != b.Host || again.User != nil {
			t.Fatalf("base %q, target %q: built %q, which reparses as %v (%v)", base, target, out, again, err)
		}
		if ruri := out.RequestURI(); !strings.HasPrefix(ruri, "/") || strings.ContainsAny(ruri, " \r\n") {
			t.Fatalf("base %q, target %q: request line target %q", base, target, ruri)
		}
	})
}
