package main

import (
	"flag"
	"fmt"
	"net/http"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// tokens runs the tests' RFC 8693 token endpoint (support.TokenExchange)
// for the exchange benchmark (tests/bench/exchange.sh): POST /token
// exchanges a subject token for `exchanged:<audience>:<subject token>`
// (client id and secret by HTTP Basic), GET /count?audience=A&subject=S
// answers how many exchanges it made for that audience and subject token.
func tokens(args []string) error {
	fs := flag.NewFlagSet("tokens", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:9400", "listen address")
	id := fs.String("client-id", "gateway", "the gateway's client id")
	secret := fs.String("client-secret", "gateway-secret", "the gateway's client secret")
	if err := fs.Parse(args); err != nil {
		return err
	}
	x := support.NewTokenExchange(*id, *secret)
	mux := http.NewServeMux()
	mux.Handle("POST /token", x)
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, x.Count(r.URL.Query().Get("audience"), r.URL.Query().Get("subject")))
	})
	return http.ListenAndServe(*addr, mux)
}
