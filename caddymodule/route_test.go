package caddymodule

import (
	"net/http"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

// TestDecide: what a request carries decides its cell, its upstream and
// the instance it is relayed to; the selection policy (pick) is asked
// only when the choice is its own, and only for the eras it is asked for.
func TestDecide(t *testing.T) {
	modernUp := &Upstream{URL: "http://modern/mcp"}
	legacyUp := &Upstream{URL: "http://legacy/mcp"}
	parkedOn := &Upstream{URL: "http://parked-on/mcp"}
	pinnedTo := &Upstream{URL: "http://pinned-to/mcp"}
	peer := translate.Owner{Instance: "gw-b", Address: "http://10.0.0.2:8080"}
	both := []eraSet{speaksModern, speaksLegacy}
	none := []eraSet{}
	cases := []struct {
		name string
		in   routeInput
		up   []eraSet // upstreams available, by era
		want decision
		asks []eraSet // what pick is asked, in order
	}{
		{"modern, modern upstream up", routeInput{method: http.MethodPost, era: eraModern}, both,
			decision{cell: cellModern, up: modernUp}, []eraSet{speaksModern}},
		{"modern, only legacy up: forward bridge", routeInput{method: http.MethodPost, era: eraModern}, []eraSet{speaksLegacy},
			decision{cell: cellForward, up: legacyUp}, []eraSet{speaksModern, speaksLegacy}},
		{"modern, nothing up", routeInput{method: http.MethodPost, era: eraModern}, none,
			decision{refuse: refuseNoUpstream}, []eraSet{speaksModern, speaksLegacy}},
		{"retry of a call parked here, modern upstream up again", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.ParkedHere, stateUp: parkedOn}, both,
			decision{cell: cellForward, up: parkedOn}, nil},
		{"retry of a call parked here, nothing up", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.ParkedHere, stateUp: parkedOn}, none,
			decision{cell: cellForward, up: parkedOn}, nil},
		{"retry of a call no longer parked here", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.ParkedHere}, both,
			decision{cell: cellForward}, nil},
		{"retry of a call parked on another instance", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.ParkedThere, stateOwner: peer}, both,
			decision{cell: cellForward, relayTo: &peer}, nil},
		{"resumable retry: served here", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.Resumable, stateUp: parkedOn}, both,
			decision{cell: cellForward, up: parkedOn}, nil},
		{"resumable retry whose call lingers on its home: relayed there", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.Resumable, stateUp: parkedOn, stateOwner: peer, lingersThere: true}, both,
			decision{cell: cellForward, up: parkedOn, relayTo: &peer}, nil},
		{"resumable retry naming an upstream not configured here", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.Resumable}, both,
			decision{cell: cellForward}, nil},
		{"requestState that does not open (an upstream's own)", routeInput{method: http.MethodPost, era: eraModern,
			state: forward.StateUnopened}, both,
			decision{cell: cellModern, up: modernUp}, []eraSet{speaksModern}},
		{"legacy initialize, legacy upstream up", routeInput{method: http.MethodPost, era: eraLegacy, initialize: true}, both,
			decision{cell: cellPinned, up: legacyUp}, []eraSet{speaksLegacy}},
		{"legacy initialize, only modern up: reverse bridge", routeInput{method: http.MethodPost, era: eraLegacy, initialize: true},
			[]eraSet{speaksModern}, decision{cell: cellReverse, up: modernUp}, []eraSet{speaksLegacy, speaksModern}},
		{"legacy initialize, nothing up", routeInput{method: http.MethodPost, era: eraLegacy, initialize: true}, none,
			decision{refuse: refuseNoLegacyUpstream}, []eraSet{speaksLegacy, speaksModern}},
		{"legacy request without a session", routeInput{method: http.MethodPost, era: eraLegacy}, both,
			decision{refuse: refuseNoSession}, nil},
		{"unknown session", routeInput{method: http.MethodGet, era: eraLegacy, session: sessionUnknown}, both,
			decision{refuse: refuseUnknownSession}, nil},
		{"pinned session, its upstream down", routeInput{method: http.MethodPost, era: eraLegacy, session: sessionPinned,
			sessionUp: pinnedTo, upstreamSession: true}, none,
			decision{cell: cellPinned, up: pinnedTo}, nil},
		{"DELETE of a pinned session with an upstream session", routeInput{method: http.MethodDelete, era: eraLegacy,
			session: sessionPinned, sessionUp: pinnedTo, upstreamSession: true}, both,
			decision{cell: cellPinned, up: pinnedTo}, nil},
		{"DELETE of a pinned session without one", routeInput{method: http.MethodDelete, era: eraLegacy,
			session: sessionPinned, sessionUp: pinnedTo}, both,
			decision{refuse: refuseNothingToEnd}, nil},
		{"held session", routeInput{method: http.MethodPost, era: eraLegacy, session: sessionHeld, sessionUp: pinnedTo}, none,
			decision{cell: cellReverse, up: pinnedTo}, nil},
		{"batch in a pinned 2025-03-26 session", routeInput{method: http.MethodPost, era: eraLegacy, session: sessionPinned,
			sessionUp: pinnedTo, batch: true, batchAllowed: true}, both,
			decision{cell: cellPinned, up: pinnedTo}, nil},
		{"batch in a pinned session of a later revision", routeInput{method: http.MethodPost, era: eraLegacy, session: sessionPinned,
			sessionUp: pinnedTo, batch: true}, both,
			decision{cell: cellPinned, up: pinnedTo, refuse: refuseBatch}, nil},
		{"batch in a held session", routeInput{method: http.MethodPost, era: eraLegacy, session: sessionHeld,
			sessionUp: pinnedTo, batch: true, batchAllowed: true}, both,
			decision{cell: cellReverse, up: pinnedTo, refuse: refuseBatch}, nil},
		{"batch without a session", routeInput{method: http.MethodPost, era: eraLegacy, batch: true, batchAllowed: true}, both,
			decision{refuse: refuseNoSession}, nil},
		{"batch in an unknown session", routeInput{method: http.MethodPost, era: eraLegacy, session: sessionUnknown,
			batch: true, batchAllowed: true}, both,
			decision{refuse: refuseUnknownSession}, nil},
		{"held session, answer to another instance's in-line request", routeInput{method: http.MethodPost, era: eraLegacy,
			session: sessionHeld, sessionUp: pinnedTo, answerOwner: &peer}, both,
			decision{cell: cellReverse, up: pinnedTo, relayTo: &peer}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var asked []eraSet
			pick := func(want eraSet) *Upstream {
				asked = append(asked, want)
				for _, e := range c.up {
					if e == want && want == speaksModern {
						return modernUp
					}
					if e == want {
						return legacyUp
					}
				}
				return nil
			}
			got := decide(c.in, pick)
			if got.cell != c.want.cell || got.up != c.want.up || got.refuse != c.want.refuse ||
				(got.relayTo == nil) != (c.want.relayTo == nil) || got.relayTo != nil && *got.relayTo != *c.want.relayTo {
				t.Errorf("decide = %+v, want %+v", got, c.want)
			}
			if len(asked) != len(c.asks) {
				t.Fatalf("pick asked for %v, want %v", asked, c.asks)
			}
			for i := range asked {
				if asked[i] != c.asks[i] {
					t.Fatalf("pick asked for %v, want %v", asked, c.asks)
				}
			}
		})
	}
}
