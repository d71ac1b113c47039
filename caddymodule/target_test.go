package caddymodule

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

func TestCheckOriginForm(t *testing.T) {
	for target, ok := range map[string]bool{
		"/mcp": true, "/mcp?x=1": true, "//x/mcp": true,
		"http:@127.0.0.1:19999/steal": false, "http://gw/mcp": false, "*": false, "/mcp?x#y": false, "/mcp#y": false,
	} {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST " + target + " HTTP/1.1\r\nHost: gw\r\n\r\n")))
		if err != nil {
			t.Fatalf("%q: %v", target, err)
		}
		if rerr := checkOriginForm(req); (rerr == nil) != ok || (rerr != nil && rerr.HTTPStatus != http.StatusBadRequest) {
			t.Errorf("checkOriginForm(%q) = %+v, want accepted %t", target, rerr, ok)
		}
	}
}
