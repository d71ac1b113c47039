package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
)

// unmarshalUpstreamAuth reads, of a block or a server,
//
//	upstream_auth none|passthrough
//	upstream_auth bearer <token>
//	upstream_auth exchange {
//		token_endpoint <url>
//		client_id      <id>
//		client_secret  <secret>
//		audience       <audience>
//		resource       <url>
//		timeout        <duration>
//		max_entries    <n>
//	}
func unmarshalUpstreamAuth(d *caddyfile.Dispenser, to **UpstreamAuth) error {
	if *to != nil {
		return d.Err("upstream_auth already specified")
	}
	a := &UpstreamAuth{}
	if !d.Args(&a.Mode) {
		return d.ArgErr()
	}
	switch a.Mode {
	case upstreamAuthNone, upstreamAuthPassthrough:
	case upstreamAuthBearer:
		if !d.Args(&a.Token) {
			return d.Err("upstream_auth bearer needs a token (e.g. {env.MCP_SERVER_TOKEN})")
		}
	case upstreamAuthExchange:
		a.Exchange = &TokenExchange{}
		if err := a.Exchange.unmarshalCaddyfile(d); err != nil {
			return err
		}
	default:
		return d.Errf("upstream_auth: unknown mode %q (none, passthrough, bearer or exchange)", a.Mode)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	*to = a
	return nil
}

// unmarshalCaddyfile reads the block of `upstream_auth exchange`.
func (x *TokenExchange) unmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch opt := d.Val(); opt {
		case "token_endpoint":
			err = face.ParseString(d, &x.TokenEndpoint)
		case "client_id":
			err = face.ParseString(d, &x.ClientID)
		case "client_secret":
			err = face.ParseString(d, &x.ClientSecret)
		case "audience":
			err = face.ParseString(d, &x.Audience)
		case "resource":
			err = face.ParseString(d, &x.Resource)
		case "timeout":
			err = face.ParseDurationNotNegative(d, &x.Timeout, "must not be negative")
		case "max_entries":
			err = face.ParseCount(d, &x.MaxEntries)
		default:
			err = d.Errf("unrecognized upstream_auth exchange option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
