package caddymodule

import (
	"net/http"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/federate"
)

// Resource URIs are not renamed: a URI goes to the server that has it —
// the first server, in configuration order, whose resources/list lists it,
// else the first whose resource template matches it (federate.Claims).
// What each principal's servers list is learned by asking them (every
// page, up to claimPages each) and kept claimsTTL; a URI no server claims
// makes the gateway ask again, at most once per claimsRefresh.

const (
	claimsTTL     = 30 * time.Second
	claimsRefresh = time.Second
	claimPages    = 20
	claimsKept    = 10_000 // principals
)

// claimsEntry is what a principal's servers list.
type claimsEntry struct {
	claims *federate.Claims
	made   time.Time
}

func newClaimsCache() *expirable.LRU[[16]byte, claimsEntry] {
	return expirable.NewLRU[[16]byte, claimsEntry](claimsKept, nil, claimsTTL)
}

// resourceOwner is the server that has uri, for the principal of r (whose
// body is body: the servers are asked with its _meta).
func (h *Handler) resourceOwner(r *http.Request, body []byte, uri string) (int, bool) {
	princ := h.principal(r)
	e, ok := h.fed.claims.Get(princ)
	if ok {
		if i, ok := e.claims.Owner(uri); ok || time.Since(e.made) < claimsRefresh {
			return i, ok
		}
	}
	e = claimsEntry{claims: h.learnClaims(r, body), made: time.Now()}
	h.fed.claims.Add(princ, e)
	return e.claims.Owner(uri)
}

// learnClaims asks every server for its resources and resource templates.
func (h *Handler) learnClaims(r *http.Request, body []byte) *federate.Claims {
	c := federate.NewClaims(h.fed.set)
	params := gjson.Parse("{}")
	if meta := gjson.GetBytes(body, "params._meta"); meta.IsObject() {
		params = gjson.Parse(`{"_meta":` + meta.Raw + `}`)
	}
	for _, method := range []string{"resources/list", "resources/templates/list"} {
		add := c.AddResources
		if method == "resources/templates/list" {
			add = c.AddTemplates
		}
		var which []int
		cursors := map[int]string{}
		for page := 0; page < claimPages; page++ {
			parts := h.askServers(r, method, params, which, func(i int) string { return cursors[i] })
			which = which[:0:0]
			for _, p := range parts {
				add(p.Server, p.Result)
				if next := gjson.GetBytes(p.Result, "nextCursor"); next.Type == gjson.String && next.Str != "" {
					cursors[p.Server] = next.Str
					which = append(which, p.Server)
				}
			}
			if len(which) == 0 {
				break
			}
		}
	}
	return c
}
