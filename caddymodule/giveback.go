package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Sessions given back between instances (translate/forward/giveback.go): an
// instance that ends a call another instance parked sends that instance a
// notice, signed as a forwarded request (relay.go) and posted to the same
// path as the client's request, and the other takes the call's upstream
// session back into its pool. Only a verified forwarded request may carry
// the notice; a client's is refused at the door.
//
// The notices bound for one instance (and path) go one at a time: those
// that arrive while one is on its way wait and go together in the next,
// up to forward.MaxNotices in one. A lone notice leaves at once; under
// load, one signed POST gives back many sessions.

// errNoHomeAddress: neither the peer list nor the state names where the
// home instance is.
var errNoHomeAddress = errors.New("the home instance's address is unknown")

// errNotTaken: the home answered that it holds no such parked call.
var errNotTaken = errors.New("the home instance holds no such parked call")

// maxNoticeAnswer bounds what is read of the home's answer to a notice.
const maxNoticeAnswer = 4 << 10

// noticeTimeout bounds one notice's POST.
const noticeTimeout = 5 * time.Second

// noticeAnswer is the body of a home's answer: whether it took each
// session the notice named, in order.
type noticeAnswer struct {
	Taken []bool `json:"taken"`
}

// pendingNotice is a session waiting to be given back, and where its
// sender waits for the outcome.
type pendingNotice struct {
	n    forward.SessionNotice
	done chan error // buffered: the queue never waits on a sender
}

// noticeQueue holds the notices bound for one home instance and path.
type noticeQueue struct {
	home    translate.Owner
	target  *url.URL
	uri     string
	pending []pendingNotice
	sending bool
}

// noticeQueues are an instance's queues, by home instance and target URL.
type noticeQueues struct {
	mu sync.Mutex
	by map[string]*noticeQueue
}

// giveBackVia returns r's forward.Request.GiveBack: it queues the session
// for the home instance at r's path and waits until the home answered (or
// ctx ends). Nil without a fleet key (no instance could verify a notice).
func (h *Handler) giveBackVia(r *http.Request) func(ctx context.Context, home translate.Owner, n forward.SessionNotice) error {
	if h.fleet.auth == nil {
		return nil
	}
	orig := *originalRequest(r).URL // the handler returns before the notice goes
	return func(ctx context.Context, home translate.Owner, n forward.SessionNotice) error {
		base := h.fleet.ownerAddress(home)
		if base == "" {
			return errNoHomeAddress
		}
		target, err := translate.ForwardURL(base, &orig)
		if err != nil {
			return err
		}
		done := make(chan error, 1)
		h.fleet.notices.add(h, home, target, orig.RequestURI(), pendingNotice{n, done})
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// add queues p, and starts the queue's sender unless one runs.
func (qs *noticeQueues) add(h *Handler, home translate.Owner, target *url.URL, uri string, p pendingNotice) {
	key := home.Instance + " " + target.String()
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.by == nil {
		qs.by = make(map[string]*noticeQueue)
	}
	q := qs.by[key]
	if q == nil {
		q = &noticeQueue{home: home, target: target, uri: uri}
		qs.by[key] = q
	}
	q.pending = append(q.pending, p)
	if !q.sending {
		q.sending = true
		go qs.send(h, key, q)
	}
}

// send posts q's notices, as many at a time as wait, until none is left;
// then the queue goes.
func (qs *noticeQueues) send(h *Handler, key string, q *noticeQueue) {
	for {
		qs.mu.Lock()
		batch := q.pending[:min(len(q.pending), forward.MaxNotices)]
		q.pending = q.pending[len(batch):]
		if len(batch) == 0 {
			delete(qs.by, key)
			qs.mu.Unlock()
			return
		}
		qs.mu.Unlock()
		ns := make([]forward.SessionNotice, len(batch))
		for i, p := range batch {
			ns[i] = p.n
		}
		taken, err := h.postNotice(q, ns)
		for i, p := range batch {
			switch {
			case err != nil:
				p.done <- err
			case !taken[i]:
				p.done <- errNotTaken
			default:
				p.done <- nil
			}
		}
	}
}

// postNotice posts one notice of ns to q's home, signed for it, and
// returns whether the home took each session.
func (h *Handler) postNotice(q *noticeQueue, ns []forward.SessionNotice) ([]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), noticeTimeout)
	defer cancel()
	notice := forward.MarshalNotice(ns)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(notice))
	if err != nil {
		return nil, err
	}
	req.URL, req.Host = q.target, ""
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(seal.ForwardedHeader, h.fleet.auth.Sign(q.home.Instance,
		seal.ForwardedRequest{Method: http.MethodPost, URI: q.uri, Body: notice}, time.Now()))
	resp, err := h.fleet.client.Do(req)
	if err != nil {
		h.metrics.Forwarded("sent", "error")
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxNoticeAnswer))
	resp.Body.Close()
	var taken []bool
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("gateway instance %s answered the session notice with %s", q.home.Instance, resp.Status)
	} else if err == nil {
		if taken = takenOf(body); len(taken) != len(ns) {
			err = fmt.Errorf("gateway instance %s answered %d of the %d sessions of a notice", q.home.Instance, len(taken), len(ns))
		}
	}
	if err != nil {
		h.metrics.Forwarded("sent", "error")
		return nil, err
	}
	h.metrics.Forwarded("sent", "ok")
	return taken, nil
}

// takenOf reads a home's answer to a notice ({"taken": [true, false, …]});
// nil when it is not one.
func takenOf(body []byte) []bool {
	list := gjson.GetBytes(body, "taken")
	if jsonrpc.ValidJSON(body) != nil || !list.IsArray() {
		return nil
	}
	var taken []bool
	for _, v := range list.Array() {
		if v.Type != gjson.True && v.Type != gjson.False {
			return nil
		}
		taken = append(taken, v.Bool())
	}
	return taken
}

// takeBack serves a notice: 200 with whether this instance took back each
// session it names (it does not when it holds no such place: its state
// expired, or this instance restarted; the sender then ends the session).
// A notice a client sent itself, unsigned, is refused.
func (h *Handler) takeBack(w http.ResponseWriter, r *http.Request, body []byte) error {
	if _, forwarded := forwardedOf(r); !forwarded {
		return jsonrpc.WriteError(w, nil, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidRequest,
			Message: "Bad Request: " + forward.NoticeSessionReturned + " is sent only between the gateway's instances"})
	}
	ns, err := forward.ParseNotice(body)
	if err != nil {
		return jsonrpc.WriteError(w, nil, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidParams,
			Message: "Bad Request: " + err.Error()})
	}
	a := noticeAnswer{Taken: make([]bool, len(ns))}
	for i, n := range ns {
		a.Taken[i] = h.bridge.TakeBack(n)
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(a)
}
