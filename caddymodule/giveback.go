package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy/seal"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

// Sessions given back between instances (translate/forward/giveback.go): an
// instance that ends a call another instance parked sends that instance a
// notice, signed as a forwarded request (relay.go) and posted to the same
// path as the client's request, and the other takes the call's upstream
// session back into its pool. Only a verified forwarded request may carry
// the notice; a client's is refused at the door.

// errNoHomeAddress: neither the peer list nor the state names where the
// home instance is.
var errNoHomeAddress = errors.New("the home instance's address is unknown")

// maxNoticeAnswer bounds what is read of the home's answer to a notice.
const maxNoticeAnswer = 4 << 10

// giveBackVia returns r's forward.Request.GiveBack: it posts the notice
// to the home instance at r's path, signed for that instance and the
// call's principal, and succeeds when the home answers 202. Nil without a
// fleet key (no instance could verify the notice).
func (h *Handler) giveBackVia(r *http.Request) func(ctx context.Context, home translate.Owner, princ [16]byte, notice []byte) error {
	if h.fleet.auth == nil {
		return nil
	}
	orig := *originalRequest(r).URL // the handler returns before the notice goes
	uri := orig.RequestURI()
	return func(ctx context.Context, home translate.Owner, princ [16]byte, notice []byte) error {
		base := h.fleet.ownerAddress(home)
		if base == "" {
			return errNoHomeAddress
		}
		target, err := forwardURL(base, &orig)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(notice))
		if err != nil {
			return err
		}
		req.URL, req.Host = target, ""
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(seal.ForwardedHeader, h.fleet.auth.Sign(home.Instance,
			seal.ForwardedRequest{Method: http.MethodPost, URI: uri, Body: notice, Principal: princ}, time.Now()))
		resp, err := h.fleet.client.Do(req)
		if err != nil {
			h.metrics.Forwarded("sent", "error")
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxNoticeAnswer))
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			h.metrics.Forwarded("sent", "error")
			return fmt.Errorf("gateway instance %s answered the session notice with %s", home.Instance, resp.Status)
		}
		h.metrics.Forwarded("sent", "ok")
		return nil
	}
}

// takeBack serves a notice: 202 when this instance took the session back,
// 404 when it holds no such place (its state expired, or this instance
// restarted: the sender then ends the session). A notice a client sent
// itself, unsigned, is refused.
func (h *Handler) takeBack(w http.ResponseWriter, r *http.Request, body []byte) error {
	from, forwarded := forwardedOf(r)
	if !forwarded {
		return writeRPCError(w, nil, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidRequest,
			Message: "Bad Request: " + forward.NoticeSessionReturned + " is sent only between the gateway's instances"})
	}
	n, err := forward.ParseNotice(body)
	if err != nil {
		return writeRPCError(w, nil, &jsonrpc.RPCError{HTTPStatus: http.StatusBadRequest, Code: jsonrpc.InvalidParams,
			Message: "Bad Request: " + err.Error()})
	}
	if !h.bridge.TakeBack(n, from.principal) {
		return writeRPCError(w, nil, &jsonrpc.RPCError{HTTPStatus: http.StatusNotFound, Code: jsonrpc.InvalidParams,
			Message: "Not Found: this instance holds no such parked call"})
	}
	w.WriteHeader(http.StatusAccepted)
	return nil
}
