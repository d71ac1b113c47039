package reverse

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// This file is the standalone GET stream of a gateway-held legacy session:
// list-changed and resource-updated notifications, fed by an upstream
// subscriptions/listen (2026-07-28) whose filter follows the
// session's resources/subscribe and resources/unsubscribe.

// Reconnection of the upstream subscription: a stream the upstream ended is
// opened again after reverseListenBackoff, at most reverseListenRetries times in a row.
const (
	reverseListenBackoff = time.Second
	reverseListenRetries = 5
)

// ErrSessionStreamOpen means the session already has a GET stream on this
// instance (the legacy transport allows one).
var ErrSessionStreamOpen = errors.New("translate: the session already has a GET stream")

// ErrNoNotifications means the upstream offers no notifications (no
// listChanged, no resource subscriptions), so there is no GET stream.
var ErrNoNotifications = errors.New("translate: the upstream offers no notifications")

// reverseListenFilter builds the notifications filter of a subscriptions/listen
// from the upstream's capabilities and the session's subscriptions; ok is
// false when the upstream offers nothing.
func reverseListenFilter(caps gjson.Result, uris []string) (filter []byte, ok bool) {
	f := listenFilter{
		PromptsListChanged:   caps.Get("prompts.listChanged").Type == gjson.True,
		ResourcesListChanged: caps.Get("resources.listChanged").Type == gjson.True,
		ToolsListChanged:     caps.Get("tools.listChanged").Type == gjson.True,
	}
	subscribable := caps.Get("resources.subscribe").Type == gjson.True
	if !f.PromptsListChanged && !f.ResourcesListChanged && !f.ToolsListChanged && !subscribable {
		return nil, false
	}
	if subscribable {
		f.ResourceSubscriptions = uris
	}
	b, _ := jsonrpc.Marshal(f) // strings and booleans always marshal
	return b, true
}

// listenFilter is the notifications filter of a subscriptions/listen (its
// fields in name order, the order the gateway has always sent them in).
type listenFilter struct {
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
}

// listenParams are the params of the upstream subscriptions/listen.
type listenParams struct {
	Meta          requestMeta     `json:"_meta"`
	Notifications json.RawMessage `json:"notifications"`
}

// Listen serves the GET stream of s: notify receives each list-changed and
// resource-updated notification until ctx ends, the client's stream fails,
// the session ends here (DELETE, expiry), the upstream ends the
// subscription the graceful way (its completion result: a legacy stream has
// no response to carry it, so the stream ends, and a legacy client opens
// it again) or the upstream keeps refusing the subscription (an error, a
// broken stream: it is opened again until it has failed
// reverseListenRetries times in a row). It returns ErrSessionStreamOpen,
// ErrNoNotifications or an *RPCError (among them the refusals of
// max_get_streams, 503, and max_get_streams_per_principal, 429) before
// sending anything when there is no stream to serve; ready is called once
// the stream is about to start.
//
// When the session subscribes to a new URI, a subscription with the new
// filter is opened and the old one is closed only once the new one is
// acknowledged, so that no notification falls between the two (one may
// come twice); changes are coalesced (resubscribe.go). The updates
// of a URI unsubscribed are dropped here.
func (rv *Bridge) Listen(ctx context.Context, s *Session, header http.Header, ready func(), notify func([]byte) error) error {
	// Whether there is a stream at all is the upstream's to say, and it is
	// asked before the session's one stream is claimed: otherwise a second
	// GET arriving while the first waits for server/discover would be told
	// 409 (a stream is open) where both must hear 405 (no stream exists), as
	// clients that open the GET stream twice right after initialize do.
	o := rv.options(s)
	disc, rerr := rv.discoverResult(ctx, o, s.Upstream, s.Principal, header)
	if rerr != nil {
		return rerr
	}
	caps := gjson.GetBytes(disc, "capabilities")
	if _, ok := reverseListenFilter(caps, nil); !ok {
		return ErrNoNotifications
	}
	var st *reverseSubscriptions
	for {
		if st, rerr = rv.subscriptionsOf(s); rerr != nil {
			return rerr
		}
		ok, retry := st.claim()
		if ok {
			break
		}
		if !retry {
			return ErrSessionStreamOpen
		}
	}
	defer rv.facts.tidy(s.ID) // nothing to remember of a stream alone
	defer st.unclaim()
	leave, rerr := rv.streams.enter(s.Principal, o.MaxGetStreams, o.MaxGetStreamsPerPrincipal)
	if rerr != nil {
		return rerr
	}
	defer leave()
	ready()

	ctx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	l := &listening{rv: rv, s: s, st: st, caps: caps, ctx: ctx,
		hdr: modernHeader(header, "subscriptions/listen", "", false), events: make(chan listenEvent)}
	l.start()
	failures := 0
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-st.ended:
			return nil // the session ended here (DELETE, expiry)
		case <-st.wake:
			l.change()
		case <-l.due:
			l.due = nil
			l.change()
		case <-retry:
			retry = nil
			l.reopen()
		case ev := <-l.events:
			current := ev.gen == l.gen
			if !current && !(l.prev != nil && ev.gen == l.prevGen) {
				continue // a subscription already replaced
			}
			switch {
			case ev.err != nil || ev.msg.Kind == jsonrpc.KindResponse:
				// That subscription ended (a result, an error, a broken stream).
				if !current {
					l.prev()
					l.prev = nil
					continue
				}
				if ev.err == nil && gjson.GetBytes(ev.msg.Raw, "result").Exists() {
					// The upstream ended it the graceful way (it stops, say):
					// so does the GET stream, the legacy client's to open
					// again (a new subscription, on whichever upstream
					// serves it).
					return nil
				}
				if failures++; failures >= reverseListenRetries {
					return nil
				}
				retry = time.After(reverseListenBackoff) // prev, if any, serves meanwhile
			default:
				if current {
					l.acknowledged()
				}
				if ev.msg.Method == "notifications/subscriptions/acknowledged" {
					if current {
						failures = 0
					}
					continue
				}
				if ev.msg.Kind == jsonrpc.KindNotification && st.subscribed(ev.msg.Raw) && notify(stripSubscriptionID(ev.msg.Raw)) != nil {
					return nil // the client is gone
				}
			}
		}
	}
}

// listenEvent is a message (or the end) of one upstream subscription.
type listenEvent struct {
	gen int
	msg jsonrpc.Message
	err error
}

// subscribeUpstream holds one upstream subscriptions/listen with filter and
// sends its messages, then its end, to events, until ctx ends.
func (rv *Bridge) subscribeUpstream(ctx context.Context, s *Session, hdr http.Header, filter []byte, gen int, events chan<- listenEvent) {
	send := func(ev listenEvent) bool {
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	id := rv.upstreamID(rv.options(s))
	body, err := jsonrpc.Marshal(jsonrpc.NewRequest(json.RawMessage(jsonrpc.Quote(id)), "subscriptions/listen", listenParams{
		Meta:          requestMeta{ClientCapabilities: ModernClientCapabilities(s.Capabilities), ProtocolVersion: translate.ModernVersion},
		Notifications: filter,
	}))
	if err != nil {
		send(listenEvent{gen: gen, err: err})
		return
	}
	a, err := postModern(ctx, rv.clientOf(rv.options(s)), s.Upstream, hdr, body)
	if err != nil {
		send(listenEvent{gen: gen, err: err})
		return
	}
	defer a.close()
	for {
		m, err := a.Next()
		if err != nil {
			send(listenEvent{gen: gen, err: err})
			return
		}
		if !send(listenEvent{gen: gen, msg: m}) {
			return
		}
	}
}

// stripSubscriptionID removes params._meta[subscriptionId] (and a _meta
// it leaves empty) from a listen-stream notification: a legacy client has
// no subscriptions/listen.
func stripSubscriptionID(raw []byte) []byte {
	meta := gjson.GetBytes(raw, "params._meta")
	if !meta.IsObject() || !meta.Get(gjson.Escape(translate.MetaSubscriptionID)).Exists() {
		return raw
	}
	params := gjson.GetBytes(raw, "params")
	cleaned := jsonrpc.RemoveMembers(meta.Raw, translate.MetaSubscriptionID)
	newParams := params.Raw[:meta.Index-params.Index] + cleaned + params.Raw[meta.Index-params.Index+len(meta.Raw):]
	if cleaned == "{}" {
		newParams = jsonrpc.RemoveMembers(newParams, "_meta")
	}
	return []byte(string(raw[:params.Index]) + newParams + string(raw[params.Index+len(params.Raw):]))
}
