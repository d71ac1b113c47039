package forward

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// Sessions given back (issue 24). A call parked holding no stream keeps
// its upstream session in the pool of the instance that parked it, its
// home (resume.go). When the retry lands on another instance, which
// finishes the call, ending the session there (DELETE) would make the
// home open a new one for its next call (initialize,
// notifications/initialized, its GET stream) and find the old one gone
// only by a check (places.go): five upstream requests a call, and
// most of the upstream's extra work behind a balancer. So the home seals
// its id and advertised address into the state (seal.ResumeState.Home,
// only for a session of its pool), and the instance that ends the call
// with its final response sends the home a notice (Request.GiveBack: the
// fleet's signed forwarding, caddymodule), naming the place, the upstream
// and the session. The home checks that it holds that place, for that
// session of that upstream, of the principal the notice was signed for,
// then frees the place, opens the session's GET stream again and puts it
// back into its pool (TakeBack). When anything fails — no address for the
// home, the home unreachable or gone, the place unknown there (expired,
// or the home restarted) — the session is ended upstream as before.
//
// A call that parks again on the other instance keeps the session there
// (out of any pool): its state has no home, and whoever ends it ends the
// session; the first home finds it gone by its checks.

// NoticeSessionReturned is the method of the notice one instance sends
// another to give back the session of a call that ended: a JSON-RPC
// notification, signed as a forwarded request. Clients may not send it.
const NoticeSessionReturned = "notifications/mcp-gateway/session_returned"

// giveBackTimeout bounds sending a notice (the session is ended upstream
// if the home did not take it within it).
const giveBackTimeout = 5 * time.Second

// SessionNotice is what a NoticeSessionReturned names.
type SessionNotice struct {
	// Place is the id of the place the home holds for the call's state.
	Place [16]byte
	// Upstream and Session name the upstream session given back.
	Upstream string
	Session  legacy.UpstreamSessionID
}

type noticeParams struct {
	Place    string `json:"place"`
	Upstream string `json:"upstream"`
	Session  string `json:"session"`
}

// MarshalNotice returns n as a NoticeSessionReturned notification.
func MarshalNotice(n SessionNotice) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string       `json:"jsonrpc"`
		Method  string       `json:"method"`
		Params  noticeParams `json:"params"`
	}{"2.0", NoticeSessionReturned, noticeParams{hex.EncodeToString(n.Place[:]), n.Upstream, string(n.Session)}})
	return b
}

// errNotice: a notice that does not parse.
var errNotice = errors.New("malformed session notice")

// ParseNotice reads a NoticeSessionReturned notification.
func ParseNotice(body []byte) (SessionNotice, error) {
	var n SessionNotice
	m := gjson.ParseBytes(body)
	if m.Get("method").String() != NoticeSessionReturned {
		return n, errNotice
	}
	place, err := hex.DecodeString(m.Get("params.place").String())
	if err != nil || len(place) != len(n.Place) {
		return n, errNotice
	}
	copy(n.Place[:], place)
	n.Upstream, n.Session = m.Get("params.upstream").String(), legacy.UpstreamSessionID(m.Get("params.session").String())
	if n.Upstream == "" || n.Session == "" {
		return n, errNotice
	}
	return n, nil
}

// homeOf records, on c resumed from rs away from its home, where to give
// its session back when it ends (r.GiveBack; nil: nowhere).
func homeOf(c *call, r Request, rs homeState) {
	if rs.home == "" || rs.home == r.Options.Instance || r.GiveBack == nil {
		return
	}
	c.home = &callHome{owner: translate.Owner{Instance: rs.home, Address: rs.address}, place: rs.place, send: r.GiveBack}
}

// homeState is what a resumable state says of the call's home.
type homeState struct {
	home, address string
	place         [16]byte
}

// callHome is where a call resumed away from its home gives its session
// back.
type callHome struct {
	owner translate.Owner
	place [16]byte
	send  func(ctx context.Context, home translate.Owner, princ [16]byte, notice []byte) error
}

// giveBack gives c's session back to its home, or ends it upstream if the
// home does not take it.
func (b *Bridge) giveBack(c *call) {
	ctx, cancel := context.WithTimeout(b.ctx, giveBackTimeout)
	defer cancel()
	n := SessionNotice{Place: c.home.place, Upstream: c.sess.URL, Session: c.sess.ID}
	if err := c.home.send(ctx, c.home.owner, c.princ, MarshalNotice(n)); err != nil {
		c.sess.Close(context.WithoutCancel(ctx))
		return
	}
	resumeEvent(c.opts, ResumeGivenBack)
}

// TakeBack takes back the session of a call this instance parked, which
// ended on another instance (see above): it reports whether it holds the
// place n names, for that session, of princ; if so, the place is freed and
// the session goes back to the pool.
func (b *Bridge) TakeBack(n SessionNotice, princ [16]byte) bool {
	b.mu.Lock()
	p := b.places[n.Place]
	ok := p != nil && p.pooled && p.sess != nil && p.princ == princ && p.sess.ID == n.Session && p.key.Upstream == n.Upstream
	b.mu.Unlock()
	if !ok {
		return false
	}
	taken, hot := b.takePlace(n.Place)
	if taken != p {
		return false // a retry here, or its expiry, took it meanwhile
	}
	b.closeLingering(hot)
	resumeEvent(p.opts, ResumeFinished)
	b.pool.Release(p.key, p.sess, p.sess.Relisten())
	return true
}
