package reverse

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file is the session side of the reverse bridge: initialize, the
// sealed gateway-held session id, and its per-instance end (DELETE).

// Session is an opened gateway-held session.
type Session struct {
	seal.ClientSession
	// Target is the upstream the session names (ClientSession.Upstream)
	// with its per-upstream options, set by whoever opened the session
	// and knows that upstream; zero: the options' defaults.
	Target translate.Target
	opts   *Options // it was opened with (nil: the bridge's own)
}

// InitRequest is a legacy initialize for the reverse bridge.
type InitRequest struct {
	// Target is the modern upstream chosen for the session (Upstream, its
	// URL, is sealed in the session id).
	translate.Target
	// Principal identifies who is calling (PrincipalHash of the evaluated
	// principal expression); the session opens only for it.
	Principal [16]byte
	// Header is sent upstream (Authorization, trace context).
	Header http.Header
	// ID is the raw JSON-RPC id of the initialize request.
	ID json.RawMessage
	// Body is the initialize request as received.
	Body []byte
	// Options are those of the configuration that received the request,
	// made by Ready (nil: the bridge's own); they seal the session.
	Options *Options
}

// Initialize terminates a legacy initialize: it negotiates the version,
// builds the InitializeResult from the upstream's server/discover (cached
// per upstream and principal for its ttlMs, at most an hour) and seals a
// session id carrying what later requests need. It returns the JSON-RPC
// response to send with the session id.
func (rv *Bridge) Initialize(ctx context.Context, r InitRequest) (response []byte, sid seal.GatewaySessionID, rerr *jsonrpc.RPCError) {
	o := rv.optionsOf(r.Options)
	p := gjson.GetBytes(r.Body, "params")
	caps := []byte("{}")
	if c := p.Get("capabilities"); c.IsObject() {
		caps = compactJSON(c.Raw)
		if len(caps) > seal.MaxClientSessionCapabilities {
			caps = compactJSON(jsonrpc.RemoveMembers(c.Raw, "experimental"))
		}
		if len(caps) > seal.MaxClientSessionCapabilities {
			return nil, "", jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: capabilities too large (more than %d bytes)", seal.MaxClientSessionCapabilities)
		}
	}
	var info []byte
	if ci := p.Get("clientInfo"); ci.IsObject() {
		info = compactJSON(ci.Raw)
		if len(info) > seal.MaxClientSessionInfo {
			// Keep the identity, drop icons and descriptions.
			info, _ = json.Marshal(implementation{Name: jsonrpc.Clip(ci.Get("name").String()), Version: jsonrpc.Clip(ci.Get("version").String())})
		}
	}
	version := NegotiateLegacyVersion(p.Get("protocolVersion").String())
	princ := r.Principal

	disc, rerr := rv.discoverResult(ctx, o, r.Upstream, princ, r.Header)
	if rerr != nil {
		return nil, "", rerr
	}
	result, err := BuildInitializeResult(version, disc, true)
	if err != nil {
		return nil, "", translate.BadGateway("the upstream's server/discover result is unusable: " + err.Error())
	}
	s := seal.ClientSession{
		Upstream: r.Upstream, Principal: princ, ProtocolVersion: version,
		Capabilities: caps, ClientInfo: info, Issued: time.Now(),
	}
	if _, err := rand.Read(s.ID[:]); err != nil {
		return nil, "", translate.BadGateway("no randomness")
	}
	sid, err = seal.SealClientSession(o.Keyring, s)
	if err != nil {
		return nil, "", translate.BadGateway("sealing the session: " + err.Error())
	}
	return translate.ResultResponse(r.ID, result), sid, nil
}

// discoverResult returns the upstream's DiscoverResult, from the cache when
// fresh.
func (rv *Bridge) discoverResult(ctx context.Context, o *Options, upstream string, princ [16]byte, header http.Header) ([]byte, *jsonrpc.RPCError) {
	now := time.Now()
	key := upstream + "\x00" + string(princ[:])
	if res, ok := rv.discover.get(key, now); ok {
		return res, nil
	}
	id := rv.upstreamID(o)
	body, err := jsonrpc.Marshal(jsonrpc.NewRequest(json.RawMessage(jsonrpc.Quote(id)), "server/discover", discoverParams{Meta: discoverMeta{
		ProtocolVersion:    translate.ModernVersion,
		ClientCapabilities: json.RawMessage("{}"),
		ClientInfo:         implementation{Name: "caddy-mcp-gateway", Version: "reverse-bridge"},
	}}))
	if err != nil {
		return nil, translate.BadGateway(err.Error())
	}
	final, rerr := rv.exchange(ctx, o, upstream, modernHeader(header, "server/discover", "", false), body, id, nil, "")
	if rerr != nil {
		return nil, rerr
	}
	res := final.Get("result")
	if !res.IsObject() {
		msg := "the upstream refused server/discover"
		if e := final.Get("error.message"); e.Exists() {
			msg += ": " + jsonrpc.Clip(e.String())
		}
		return nil, translate.BadGateway(msg)
	}
	if ttl := res.Get("ttlMs"); translate.ValidTTL(ttl) && ttl.Num > 0 {
		d := min(time.Duration(ttl.Num)*time.Millisecond, maxDiscoverTTL)
		rv.discover.put(key, []byte(res.Raw), now.Add(d), now)
	}
	return []byte(res.Raw), nil
}

// Open opens a gateway-held session id for principal (PrincipalHash of the
// evaluated principal expression) with the keyring and
// session lifetime of opts (made by Ready; nil: the bridge's own),
// which then serve the session's requests. Every failure is ErrNoSession
// (wrapped).
func (rv *Bridge) Open(opts *Options, token string, principal [16]byte, now time.Time) (*Session, error) {
	s, err := seal.OpenClientSession(rv.optionsOf(opts).Keyring, seal.GatewaySessionID(token))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoSession, err)
	}
	return rv.Session(opts, s, principal, now)
}

// Session is Open for a session id already opened (seal.OpenSessionID,
// with opts' keyring): it checks what the seal does not — the principal,
// the session's lifetime, a DELETE on this instance.
func (rv *Bridge) Session(opts *Options, s seal.ClientSession, principal [16]byte, now time.Time) (*Session, error) {
	o := rv.optionsOf(opts)
	switch {
	case s.Principal != principal:
		return nil, fmt.Errorf("%w: another principal's", ErrNoSession)
	case !now.Before(s.Issued.Add(o.SessionLifetime)):
		return nil, fmt.Errorf("%w: expired", ErrNoSession)
	}
	gone := false
	rv.facts.view(s.ID, now, func(f *sessionFacts) { gone = f.deleted })
	if gone {
		return nil, fmt.Errorf("%w: deleted", ErrNoSession)
	}
	return &Session{ClientSession: s, opts: o}, nil
}

// Delete ends a session on this instance (DELETE): its calls in progress
// here end as if the client cancelled them (an upstream task is
// cancelled), its GET stream ends and its subscriptions are dropped. The
// id stays sealed and valid elsewhere: another instance only refuses it
// once it expires. Here it stays refused until then: when the table of
// session facts is full, the DELETE is refused instead (503, or 429 when
// the principal's share is full) and the session goes on.
func (rv *Bridge) Delete(s *Session) *jsonrpc.RPCError {
	var subs *reverseSubscriptions
	rerr := rv.facts.update(s.ID, s.Principal, rv.expiry(s), time.Now(), true, func(f *sessionFacts) {
		f.deleted, f.level = true, ""
		subs, f.subs = f.subs, nil
	})
	if rerr != nil {
		return rerr
	}
	if subs != nil {
		subs.release()
	}
	rv.mu.Lock()
	for k, c := range rv.calls {
		if k.session == s.ID {
			c.cancel(errSessionDeleted)
		}
	}
	rv.mu.Unlock()
	return nil
}

// setLevel records logging/setLevel for s, or refuses it when the table of
// session facts is full.
func (rv *Bridge) setLevel(s *Session, level string) *jsonrpc.RPCError {
	return rv.facts.update(s.ID, s.Principal, rv.expiry(s), time.Now(), true, func(f *sessionFacts) { f.level = level })
}

// levelOf returns the log level s set ("" if none).
func (rv *Bridge) levelOf(s *Session) (level string) {
	rv.facts.view(s.ID, time.Now(), func(f *sessionFacts) { level = f.level })
	return level
}

// expiry is when s expires, and its facts with it.
func (rv *Bridge) expiry(s *Session) time.Time {
	return s.Issued.Add(rv.options(s).SessionLifetime)
}

// compactJSON returns raw without insignificant whitespace.
func compactJSON(raw string) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(raw)); err != nil {
		return []byte(raw)
	}
	return b.Bytes()
}

// implementation is the identity kept of a clientInfo too large to keep
// whole.
type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// discoverParams are the params of the gateway's own server/discover.
type discoverParams struct {
	Meta discoverMeta `json:"_meta"`
}

// discoverMeta is the _meta of the gateway's own server/discover, in the
// order it has always been sent in.
type discoverMeta struct {
	ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	ClientInfo         implementation  `json:"io.modelcontextprotocol/clientInfo"`
}
