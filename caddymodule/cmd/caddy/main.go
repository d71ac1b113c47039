// Command caddy is Caddy with the mcp_gateway module plugged in: the same
// main package xcaddy generates, committed so that a plain `go build` makes
// the binary with the versions pinned in go.mod:
//
//	go build -trimpath -ldflags='-w -s' -tags=nobadger,nomysql,nopgx -o caddy ./caddymodule/cmd/caddy
//
// xcaddy.json lists the same build for xcaddy users; a test keeps the two in
// step.
package main

import (
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	// plug in Caddy modules here
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule"
)

func main() { caddycmd.Main() }
