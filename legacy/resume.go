package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/traces"
)

// Resuming a call on a session opened earlier, perhaps by another gateway
// instance: the forward bridge parks a call in front of a resumable
// upstream (its call streams' events carry ids) with no stream open, and
// the client's retry goes on with it from the sealed requestState alone
// (translate/forward/resume.go). Attach names the session again; Reopen
// opens the call's stream again with GET and Last-Event-ID, and the
// upstream replays what the stream sent after that event, then goes on.

// Attach returns the session id of url the gateway opened earlier, without
// initializing anything: no standalone GET stream, no inbox. header is
// sent with every request. Close ends it upstream (DELETE).
func Attach(client Doer, url string, header http.Header, id UpstreamSessionID, version string) *Session {
	s := &Session{URL: url, ID: id, Version: version, client: client, header: traces.WithoutTraceContext(header), listening: closedChan}
	s.touch()
	return s
}

// Detach stops the session's standalone GET stream, if it has one, and
// leaves the session open upstream: the caller hands it over to whoever
// attaches it again (Attach), or ends it with Close, or keeps it for
// Relisten. Messages the upstream sends on the standalone stream from then
// on are not read. Once the stream's reader has returned (at once: its
// connection is closed), what the stream needed (the inbox, what is still
// in it, its context) is let go of: a parked call's session is kept small.
// The caller must hold the session alone (no call of it running).
func (s *Session) Detach() {
	if s.stopListen == nil {
		s.inbox = nil // never written to (no stream): Relisten needs none
		return
	}
	s.stopListen()
	if s.listenDone != nil {
		select {
		case <-s.listenDone:
		case <-time.After(5 * time.Second):
			return // still reading: keep what it writes to
		}
	}
	s.inbox, s.stopListen, s.listenDone, s.streamLost, s.listening, s.relisten = nil, nil, nil, nil, closedChan, true
}

// closedChan is the Listening channel of a session whose GET stream
// Detach dropped.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// reopenConflicts bounds how long Reopen waits for the upstream to let go
// of the stream's previous connection (409 Conflict: it still writes to
// it; the gateway closed it only just).
const reopenConflicts = 2 * time.Second

// Reopen opens again the stream of the session's call whose upstream
// request id is callID, after the event lastID (GET with Last-Event-ID):
// the upstream replays what the stream sent after it, then goes on until
// the response to the call. An upstream that no longer knows the session
// or the stream (404, or 400: an upstream restarted, or whose event store
// dropped the stream) gives an error wrapping ErrSessionGone.
func (s *Session) Reopen(ctx context.Context, callID json.RawMessage, lastID string) (*Call, error) {
	if lastID == "" {
		return nil, errors.New("no event id to resume after")
	}
	ctx, cancel := context.WithCancel(ctx)
	deadline := time.Now().Add(reopenConflicts)
	for wait := 500 * time.Microsecond; ; wait = min(2*wait, 400*time.Millisecond) {
		resp, err := s.getAfter(ctx, lastID)
		if err != nil {
			cancel()
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusOK:
			c := &Call{ID: callID, resp: resp, session: s, ctx: ctx, cancel: cancel, after: lastID}
			c.start(s.callBuffer())
			return c, nil
		case resp.StatusCode == http.StatusConflict && time.Now().Add(wait).Before(deadline):
			resp.Body.Close()
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				cancel()
				return nil, ctx.Err()
			}
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest:
			resp.Body.Close()
			cancel()
			return nil, fmt.Errorf("%w (the upstream answered the stream's resumption with %s)", ErrSessionGone, resp.Status)
		default:
			resp.Body.Close()
			cancel()
			return nil, fmt.Errorf("resuming the call's stream: upstream answered %s", resp.Status)
		}
	}
}

// SetCallBuffer sets how many messages each call of the session holds
// unread (see LeaseLimits.CallBuffer; 0: DefaultCallBuffer), for a
// session no lease gave one (Attach).
func (s *Session) SetCallBuffer(n int) { s.buffer.Store(int32(min(max(n, 0), 1<<16))) }

// Relisten readies a session whose GET stream Detach stopped (or that
// still has one) to go back to its pool on the instance that detached it:
// a session opened with its stream (Open's listen) opens it again, with a
// new inbox, once the stream's last reader has returned (listenDone); one
// opened without, which Listen may have given a stream since, is left
// without, for the next Listen. What the old inbox still held is dropped.
// It reports false when the old stream did not end within 5s: the session
// then has none, and the caller must not give it back to the pool.
func (s *Session) Relisten() bool {
	if !s.relisten {
		if s.stopListen == nil || s.listenDone == nil {
			return true // no stream, or Detach dropped it: see below
		}
		s.stopListen()
		select {
		case <-s.listenDone:
		case <-time.After(5 * time.Second):
			return false
		}
	}
	s.relisten = false
	if !s.listenAtOpen {
		s.inbox, s.stopListen, s.listenDone, s.streamLost, s.listening = nil, nil, nil, nil, closedChan
		return true
	}
	s.startListening()
	return true
}

// Alive asks the upstream whether it still knows the session: false when
// it answers 404 (the session ended, e.g. because the instance that
// finished its call ended it), or 400, as servers built on the TypeScript
// SDK's example answer a session id they do not know; true when it takes
// the message (2xx). Anything else (a failure, another status) is an
// error, and the caller should assume the session lives.
//
// The message is a notification, notifications/cancelled for a request id
// the session never used (a receiver ignores the cancellation of a request
// it does not know), not a ping: an upstream keeps no answer to a
// notification, whereas the answer to a ping goes into its event store,
// and an event store that does not keep streams apart (server-everything's
// replays every event after Last-Event-ID, whatever its stream) would
// replay it on the stream of the call the session holds, as if the call
// had gone on.
func (s *Session) Alive(ctx context.Context) (bool, error) {
	if s.ID == "" {
		return false, errors.New("the upstream keeps no session")
	}
	id := jsonrpc.Quote("gw-alive-" + strconv.FormatInt(s.nextID.Add(1), 10))
	resp, err := s.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`,"reason":"gateway liveness check"}}`))
	if err != nil {
		return true, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAliveAnswer))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest:
		return false, nil
	case resp.StatusCode/100 == 2:
		return true, nil
	}
	return true, fmt.Errorf("the upstream answered a liveness check with %s", resp.Status)
}

// maxAliveAnswer bounds what Alive reads of the answer to its notification
// (none, or an error), so that the connection is reused.
const maxAliveAnswer = 64 << 10
