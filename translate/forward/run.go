package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// Running: a call relays the upstream's answer to its client's request
// (progress, log messages), answers or holds the upstream's requests, and
// ends with the result, or parks when the upstream asks for input (the
// life of a call: call.go).

// run relays the upstream answer until the result, or until the upstream
// asks for input and the call parks. It returns the request's outcome, and
// the upstream failure that ended it, if any (for the logs).
//
// Once the upstream has asked, the round takes the questions already there
// and parks; for a target known to ask several at once, or not known yet
// (gatherPolicy), it waits GatherWindow for siblings first. A round that asks again for
// answers missing from the retry (reask) takes what is there and parks.
func (b *Bridge) run(ctx context.Context, c *call, r Request, sink translate.Sink, fresh map[string]json.RawMessage, reask bool) (string, error) {
	var gather, window <-chan time.Time
	if c.taskRule != nil && !reask && DeclaresTasks(r.ClientCapabilities) {
		// Held up to the window, then a task (task.go).
		window = time.After(c.taskRule.Window)
	}
	asked := 0          // new questions this round
	collecting := reask // the round takes what is already there, then parks
	taken := 0          // messages taken while collecting
	msgs := c.up.Messages()
	for {
		var m jsonrpc.Message
		ok, inbox, stream := true, false, false
		switch {
		case len(c.held) > 0:
			m, c.held = c.held[0], c.held[1:]
			stream = true
		case collecting:
			if taken++; taken > maxCollected {
				return b.parkRound(c, r, sink, asked), nil // a chatty upstream
			}
			yieldToReaders()
			select {
			case m, ok = <-msgs:
				stream = true
			case m = <-c.sess.Inbox():
				inbox = true
			default:
				return b.parkRound(c, r, sink, asked), nil
			}
		default:
			select {
			case m, ok = <-msgs:
				stream = true
			case m = <-c.sess.Inbox():
				inbox = true
			case <-gather:
				return b.parkRound(c, r, sink, asked), nil
			case <-window:
				if asked == 0 {
					return b.becomeTask(ctx, c, r, sink), nil
				}
				window = nil // a round is gathering: it parks
				continue
			case <-ctx.Done():
				// The gateway is stopping, its client still there: what the
				// upstream sent first goes first, so that a result that came
				// with the cancellation is delivered, not thrown away.
				if requestGone(ctx).HTTPStatus != 499 {
					select {
					case m, ok = <-msgs:
						stream = true
					default:
					}
				}
				if !ok || !stream {
					return b.requestEnded(ctx, c, r, sink), nil
				}
			}
		}
		if !ok {
			return b.upstreamEnded(c, r, sink)
		}
		if stream {
			c.seen++
		}
		if m.Kind == jsonrpc.KindRequest && translate.IsInputMethod(m.Method) {
			b.learnStream(c, inbox)
			c.inboxAsked = c.inboxAsked || inbox
		}
		switch {
		case m.Kind == jsonrpc.KindRequest:
			if !b.upstreamRequest(c, r, m, fresh) {
				continue
			}
		case inbox:
			continue // the session's other messages are not the call's
		case m.Kind == jsonrpc.KindResponse && string(m.ID) == string(c.up.ID):
			if c.taskRule != nil && c.taskRule.Mode == TaskRequired && DeclaresTasks(r.ClientCapabilities) {
				// A required tool answers with a task, even one that
				// ended within its window.
				outcome := b.completedTask(ctx, c, r, m, sink)
				b.finish(c, true)
				b.report(c, translate.OutcomeComplete, "")
				return outcome, nil
			}
			b.finish(c, true)
			outcome := b.respondFinal(c, r, m, sink)
			b.report(c, outcome, "")
			return outcome, nil
		case m.Kind == jsonrpc.KindNotification:
			if err := relayNotification(m, r, sink); err != nil {
				// The client stopped reading (or left): nobody will
				// see the result.
				b.abandon(c, translate.OutcomeCancelled, "client stopped reading")
				return translate.OutcomeCancelled, nil
			}
			continue
		default:
			continue
		}
		asked++
		o := c.opts
		if len(c.pending) > o.MaxInputsPerRound {
			b.gather.learn(c, asked > 1)
			b.abandon(c, translate.OutcomeError, "too many requests for input")
			_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, translate.BadGateway(
				fmt.Sprintf("the upstream asked for more than %d inputs in one round (max_inputs_per_round); the call was cancelled", o.MaxInputsPerRound))))
			return translate.OutcomeError, nil
		}
		if asked == 1 && !collecting {
			if b.gather.waits(c) {
				gather = time.After(o.GatherWindow)
			} else {
				collecting = true
			}
		}
	}
}

// requestEnded abandons c when the client's request ended before the call:
// the client left, or the gateway is stopping (the client may still be
// listening: it is told). A call resumed from a resumable state is left
// upstream when the gateway is stopping (leave): the client's retry, sent
// again to another instance, goes on with it there.
func (b *Bridge) requestEnded(ctx context.Context, c *call, r Request, sink translate.Sink) string {
	rerr := requestGone(ctx)
	if c.base != nil && rerr.HTTPStatus != 499 {
		b.leave(c, goneReason(rerr))
	} else {
		b.abandon(c, translate.OutcomeCancelled, goneReason(rerr))
	}
	if rerr.HTTPStatus != 499 {
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
	}
	return translate.OutcomeCancelled
}

// upstreamEnded answers the client when the upstream's answer ended without
// the call's result; it returns the outcome and why (for the logs: the
// transport's error may name the upstream's address).
func (b *Bridge) upstreamEnded(c *call, r Request, sink translate.Sink) (string, error) {
	rerr := translate.UpstreamFailure("the upstream ended the call without a result", c.up.Err())
	switch {
	case errors.Is(rerr.Cause, legacy.ErrBacklog):
		// The upstream is still working: tell it to stop. The client may
		// know why (max_buffered_notifications).
		rerr.Message += ": " + legacy.ErrBacklog.Error()
		b.abandon(c, translate.OutcomeError, "too many unread messages")
	case errors.Is(rerr.Cause, jsonrpc.ErrJSONTooDeep):
		// Its stream was closed on a nesting bomb; it may still be
		// working on the call.
		rerr.Message += ": it sent JSON nested too deeply"
		b.abandon(c, translate.OutcomeError, "the upstream sent JSON nested too deeply")
	default:
		b.finish(c, false)
		b.report(c, translate.OutcomeError, rerr.Detail())
	}
	_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, rerr))
	return translate.OutcomeError, rerr.Cause
}

// upstreamRequest handles a request the upstream made during the call. It
// reports whether the request now waits for the client.
func (b *Bridge) upstreamRequest(c *call, r Request, m jsonrpc.Message, fresh map[string]json.RawMessage) bool {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	params := m.Params()
	switch {
	case m.Method == "ping":
		_ = c.sess.Respond(ctx, m.ID, []byte("{}"), nil)
		return false
	case !translate.IsInputMethod(m.Method) || !translate.InputCapable[c.method]:
		_ = c.sess.Respond(ctx, m.ID, nil, []byte(`{"code":-32601,"message":"Method not found"}`))
		return false
	case !translate.ClientSupports(r.ClientCapabilities, m.Method, params):
		res, errObj := translate.CancelAnswer(m.Method)
		_ = c.sess.Respond(ctx, m.ID, res, errObj)
		return false
	}
	w := translate.StartWatch(&c.overhead)
	ir, err := translate.NewInputRequest(m.Method, params, &c.keys)
	w.Stop()
	if err != nil {
		res, errObj := translate.CancelAnswer(m.Method)
		_ = c.sess.Respond(ctx, m.ID, res, errObj)
		return false
	}
	if resp, ok := fresh[ir.Key]; ok && translate.ValidateInputResponse(ir.Method, resp) == nil {
		// The client already answered this question (a fresh request
		// carrying inputResponses): no round trip.
		_ = c.sess.Respond(ctx, m.ID, resp, nil)
		return false
	}
	if len(c.pending) == 0 {
		// The round's first question: a resumed stream starts before it.
		c.resumeAt, c.seen = m.After, 1
	}
	c.pending = append(c.pending, pendingInput{InputRequest: ir, upstreamID: m.ID})
	return true
}

// respondFinal reshapes the upstream's response for the modern client and
// returns the outcome.
func (b *Bridge) respondFinal(c *call, r Request, m jsonrpc.Message, sink translate.Sink) string {
	w := translate.StartWatch(&c.overhead)
	if res := translate.ResultOf(m.Raw); res != nil {
		if r.Method == "tools/list" {
			b.support.learn(c.key.Upstream, r.Principal, res)
		}
		out, err := translate.ReshapeResult(r.Method, res, b.reshapeOptions(c))
		w.Stop()
		if err != nil {
			_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, translate.BadGateway(err.Error())))
			return translate.OutcomeError
		}
		_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, out))
		return translate.OutcomeComplete
	}
	errObj := translate.ErrorOf(m.Raw)
	if reqs, ok := translate.URLElicitationFromError(errObj); ok && translate.InputCapable[r.Method] {
		// A legacy "URL elicitation required" error becomes an input round:
		// the client retries once the user is done, and the call runs again.
		answer := translate.ResultResponse(r.ID, b.inputRequired(c, reqs, ""))
		w.Stop()
		_ = sink.Respond(http.StatusOK, answer)
		return translate.OutcomeInputRequired
	}
	code, out := translate.ReshapeError(errObj)
	w.Stop()
	status := http.StatusOK
	switch code {
	case jsonrpc.MissingRequiredClientCapability:
		status = http.StatusBadRequest // the gateway's convention for legacy servers, see docs/behaviour.md
	case jsonrpc.MethodNotFound:
		// 404 is the transport's answer for a method the server does not
		// implement; a -32601 from the handler of a method the upstream
		// offers (an unknown tool) stays in-band.
		if !upstreamOffers(c.sess.InitResult, r.Method) {
			status = http.StatusNotFound
		}
	}
	_ = sink.Respond(status, translate.ErrorObjectResponse(r.ID, out))
	return translate.OutcomeError
}

// relayNotification passes on the notifications related to the request:
// progress always, log messages only when the request asked with logLevel.
// It returns the sink's error: the client is not reading.
func relayNotification(m jsonrpc.Message, r Request, sink translate.Sink) error {
	switch m.Method {
	case "notifications/progress":
		return sink.Notify(m.Raw)
	case "notifications/message":
		if r.LogLevel != "" && logLevelAtLeast(translate.StringField(m.Params(), "level"), r.LogLevel) {
			return sink.Notify(m.Raw)
		}
	}
	return nil
}

// logLevelAtLeast reports whether level is at or above threshold in the
// order of logLevels.
func logLevelAtLeast(level, threshold string) bool {
	l, t := slices.Index(translate.LogLevels, level), slices.Index(translate.LogLevels, threshold)
	return l >= 0 && l >= t
}
