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

// Sessions given back. A call parked holding no stream keeps
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
// fleet's signed forwarding, caddymodule, which sends what is bound for
// one home together), naming the place, the principal, the upstream and
// the session. The home checks that it holds that place, for that session
// of that upstream, of that principal, then frees the place, opens the
// session's GET stream again and puts it back into its pool (TakeBack). When anything fails — no address for the
// home, the home unreachable or gone, the place unknown there (expired,
// or the home restarted) — the session is ended upstream as before.
//
// A call that parks again on the other instance keeps the session there
// (out of any pool): its state has no home, and whoever ends it ends the
// session; the first home finds it gone by its checks.

// NoticeSessionReturned is the method of the notice one instance sends
// another to give back the sessions of calls that ended: a JSON-RPC
// notification, signed as a forwarded request, naming up to MaxNotices
// sessions (the notices bound for one instance while one is on its way go
// together in the next). Clients may not send it.
const NoticeSessionReturned = "notifications/mcp-gateway/session_returned"

// MaxNotices bounds the sessions one notice names.
const MaxNotices = 64

// giveBackTimeout bounds sending a notice (the session is ended upstream
// if the home did not take it within it).
const giveBackTimeout = 5 * time.Second

// SessionNotice is a session a NoticeSessionReturned gives back.
type SessionNotice struct {
	// Place is the id of the place the home holds for the call's state.
	Place [16]byte
	// Principal is the hash of the principal whose call it was.
	Principal [16]byte
	// Upstream and Session name the upstream session given back.
	Upstream string
	Session  legacy.UpstreamSessionID
}

type noticeEntry struct {
	Place     string `json:"place"`
	Principal string `json:"principal"`
	Upstream  string `json:"upstream"`
	Session   string `json:"session"`
}

// MarshalNotice returns ns as a NoticeSessionReturned notification.
func MarshalNotice(ns []SessionNotice) []byte {
	entries := make([]noticeEntry, len(ns))
	for i, n := range ns {
		entries[i] = noticeEntry{hex.EncodeToString(n.Place[:]), hex.EncodeToString(n.Principal[:]), n.Upstream, string(n.Session)}
	}
	type params struct {
		Sessions []noticeEntry `json:"sessions"`
	}
	b, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  params `json:"params"`
	}{"2.0", NoticeSessionReturned, params{entries}})
	return b
}

// errNotice: a notice that does not parse.
var errNotice = errors.New("malformed session notice")

// ParseNotice reads a NoticeSessionReturned notification: one to
// MaxNotices sessions, each fully named.
func ParseNotice(body []byte) ([]SessionNotice, error) {
	m := gjson.ParseBytes(body)
	sessions := m.Get("params.sessions")
	if m.Get("method").String() != NoticeSessionReturned || !sessions.IsArray() {
		return nil, errNotice
	}
	var ns []SessionNotice
	var err error
	sessions.ForEach(func(_, e gjson.Result) bool {
		var n SessionNotice
		if len(ns) == MaxNotices || !hex16(e.Get("place").String(), &n.Place) || !hex16(e.Get("principal").String(), &n.Principal) {
			err = errNotice
			return false
		}
		n.Upstream, n.Session = e.Get("upstream").String(), legacy.UpstreamSessionID(e.Get("session").String())
		if n.Upstream == "" || n.Session == "" {
			err = errNotice
			return false
		}
		ns = append(ns, n)
		return true
	})
	if err != nil || len(ns) == 0 {
		return nil, errNotice
	}
	return ns, nil
}

// hex16 decodes s, 32 hex digits, into b.
func hex16(s string, b *[16]byte) bool {
	if len(s) != 2*len(b) {
		return false
	}
	_, err := hex.Decode(b[:], []byte(s))
	return err == nil
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
	send  func(ctx context.Context, home translate.Owner, n SessionNotice) error
}

// giveBack gives c's session back to its home, or ends it upstream if the
// home does not take it.
func (b *Bridge) giveBack(c *call) {
	ctx, cancel := context.WithTimeout(b.ctx, giveBackTimeout)
	defer cancel()
	n := SessionNotice{Place: c.home.place, Principal: c.princ, Upstream: c.sess.URL, Session: c.sess.ID}
	if err := c.home.send(ctx, c.home.owner, n); err != nil {
		c.sess.Close(context.WithoutCancel(ctx))
		return
	}
	resumeEvent(c.opts, ResumeGivenBack)
}

// TakeBack takes back the session of a call this instance parked, which
// ended on another instance (see above): it reports whether it holds the
// place n names, for that session, of n's principal; if so, the place is
// freed and the session goes back to the pool.
func (b *Bridge) TakeBack(n SessionNotice) bool {
	b.mu.Lock()
	p := b.places[n.Place]
	ok := p != nil && p.pooled && p.sess != nil && p.princ == n.Principal && p.sess.ID == n.Session && p.key.Upstream == n.Upstream
	b.mu.Unlock()
	if !ok {
		return false
	}
	taken, hot := b.takePlace(n.Place)
	if taken != p {
		return false // a retry here, or its expiry, took it meanwhile
	}
	b.cameQuickly(p) // its retry came quickly, elsewhere: relayed here next time (linger.go)
	b.closeLingering(hot)
	resumeEvent(p.opts, ResumeFinished)
	b.pool.Release(p.key, p.sess, p.sess.Relisten())
	return true
}
