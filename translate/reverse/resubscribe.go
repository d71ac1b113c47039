package reverse

import (
	"context"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
)

// This file is how a GET stream's upstream subscription follows the
// session's resources/subscribe: a subscriptions/listen carries every
// subscribed URI (the protocol has no delta), so each change resends them
// all. Changes are coalesced so that the upstream receives at most about
// twice the bytes the client sent: at most one new subscription in flight
// (not yet acknowledged) and one change pending; and a change is sent at
// once only while the bytes of the subscriptions/listen sent upstream for
// the session, this one's included, stay within one and a half times those
// of the client's subscribes and unsubscribes and resubscribeAllowance
// (for the first few small changes, whose envelope outweighs the client's).
// Otherwise it waits until reverseResubscribeEvery after the previous new
// filter: the half left covers that one. A session's filter holds at most
// maxSubscriptionBytes of URIs, so one filter per period and session is the
// most a client sending little can make the upstream receive.

// reverseResubscribeEvery is how often a change the client's bytes do not
// pay for may reach the upstream.
const reverseResubscribeEvery = 2 * time.Second

// resubscribeAllowance is what the upstream may receive for a session
// beyond what the client paid for.
const resubscribeAllowance = 4 << 10

// listening is the state of one GET stream's upstream subscriptions.
type listening struct {
	rv     *Bridge
	s      *Session
	st     *reverseSubscriptions
	caps   gjson.Result
	ctx    context.Context
	hdr    http.Header
	events chan listenEvent

	gen, prevGen int
	cur, prev    context.CancelFunc // prev: the subscription cur replaces, until cur is acknowledged
	acked        bool               // cur was acknowledged (or delivered)
	pending      bool               // a change waits
	due          <-chan time.Time   // when a waiting change may be sent
}

// open starts a subscription of generation l.gen with uris.
func (l *listening) open(uris []string) {
	filter, _ := reverseListenFilter(l.caps, uris)
	sctx, cancel := context.WithCancel(l.ctx)
	go l.rv.subscribeUpstream(sctx, l.s, l.hdr, filter, l.gen, l.events)
	l.cur, l.acked = cancel, false
}

// start opens the first subscription: with the session's URIs when the
// budget allows, else without them until it does.
func (l *listening) start() {
	uris, n := l.st.filterURIs()
	if at, ok := l.st.admit(n, time.Now()); !ok {
		uris = nil
		l.wait(at)
	}
	l.open(uris)
}

// change sends the session's new filter upstream, or lets it wait.
func (l *listening) change() {
	if !l.acked {
		l.pending = true // one in flight: the change follows its acknowledgement
		return
	}
	uris, n := l.st.filterURIs()
	if at, ok := l.st.admit(n, time.Now()); !ok {
		l.wait(at)
		return
	}
	l.pending, l.due = false, nil
	if l.prev != nil {
		l.prev()
	}
	l.prev, l.prevGen = l.cur, l.gen
	l.gen++
	l.open(uris)
}

// wait lets a change wait until at.
func (l *listening) wait(at time.Time) {
	l.pending = true
	if l.due == nil {
		l.due = time.After(time.Until(at))
	}
}

// acknowledged notes that the current subscription is live: the one it
// replaces can go, and a pending change follow.
func (l *listening) acknowledged() {
	l.acked = true
	if l.prev != nil {
		l.prev()
		l.prev = nil
	}
	if l.pending && l.due == nil {
		l.change()
	}
}

// reopen replaces a subscription the upstream ended, with the session's
// filter (its bytes count, but the upstream asked for them).
func (l *listening) reopen() {
	l.cur() // already ended; release its context
	uris, n := l.st.filterURIs()
	l.st.note(n)
	l.pending, l.due = false, nil
	l.gen++
	l.open(uris)
}

// admit reports whether a subscriptions/listen of n bytes may go upstream now,
// and counts it; else when it may.
func (st *reverseSubscriptions) admit(n int64, now time.Time) (time.Time, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	next := st.lastOpen.Add(reverseResubscribeEvery)
	if 2*(st.sent+n) > 3*st.heard+2*resubscribeAllowance && now.Before(next) {
		return next, false
	}
	st.sent += n
	st.lastOpen = now
	return time.Time{}, true
}

// note counts a subscriptions/listen of n bytes sent upstream.
func (st *reverseSubscriptions) note(n int64) {
	st.mu.Lock()
	st.sent += n
	st.mu.Unlock()
}
