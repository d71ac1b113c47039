package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file runs a REST call: the internal modern tools/call (or its
// retry with the round's answers), on the instance that received the PUT
// or the advance, in the background: the client's request waits for it
// only up to rest_wait. While it runs, the instance renews the record's
// lease; when it ends (or asks questions) the record says so — unless the
// call was cancelled meanwhile, which the record's changed etag tells.

// restFastWindow bounds how long a PUT or an advance holds the record's
// lock while the call runs: a call that ends (or asks) within it has its
// record written once, with its outcome; a longer one is written
// running, and goes on in the background.
const restFastWindow = 500 * time.Millisecond

// restStart starts call for rec (running; its etag the running one) as
// the run of key on this instance (errRESTBusy beyond
// rest_max_calls_per_principal), owned here from now, while the caller
// holds the record's lock, and waits up to the fast window (at most
// rest_wait). It returns the record to write now: the outcome (with a new
// etag) when the call ended or asked within it, else rec; then pending is
// the outcome to come, for restContinue.
func (h *Handler) restStart(ctx context.Context, r *http.Request, key string, rec seal.RESTCall, call sagaCall, run *restRun, now time.Time) (seal.RESTCall, <-chan seal.RESTCall, error) {
	rec.Owner, rec.Lease = h.fleet.instance, now.Add(time.Duration(h.Tasks.Lease)).UnixMilli()
	if err := restRuns.start(key, run, h.REST.MaxCallsPerPrincipal); err != nil {
		return rec, nil, err
	}
	out := make(chan seal.RESTCall, 1)
	go func() {
		delDone := h.calls.add(run.cancel) // ended when Caddy exits
		defer delDone()
		defer func() {
			if p := recover(); p != nil {
				h.logger.Error("REST face: a call panicked", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
				failed := rec
				failed.Status, failed.Error = restFailed, json.RawMessage(`{"code":-32603,"message":"the gateway failed making the call"}`)
				out <- failed
			}
		}()
		out <- h.restRounds(ctx, r, rec, call, &run.progress)
	}()
	t := time.NewTimer(min(restFastWindow, time.Duration(h.REST.Wait)))
	defer t.Stop()
	select {
	case o := <-out:
		run.cancel(nil)
		return restOutcome(o, time.Now()), nil, nil
	case <-t.C:
		return rec, out, nil
	}
}

// restOutcome is the record of an outcome as written at now: a new etag,
// no owner.
func restOutcome(o seal.RESTCall, now time.Time) seal.RESTCall {
	o.ETag, o.Updated, o.Owner, o.Lease = newETag(), now.UnixMilli(), "", 0
	return o
}

// restContinue follows a call restStart left running (its record written
// running with etag): it renews the record's lease until the outcome
// comes, writes it, and sends the record as written on done.
func (h *Handler) restContinue(key, etag string, pending <-chan seal.RESTCall, run *restRun, done chan<- seal.RESTCall) {
	defer restRuns.end(key, run)
	defer run.cancel(nil)
	stopLease := h.restKeepLease(context.Background(), key, etag, run)
	out := <-pending
	stopLease()
	final, err := h.restFinish(key, etag, out)
	if err != nil {
		h.logger.Warn("REST face: the call's outcome could not be written", zap.String("tool", out.Tool), zap.Error(err))
		final = restOutcome(out, time.Now())
	}
	done <- final
}

// restRounds makes the call and the rounds the gateway answers itself
// (roots), and returns the record as it should read after: ended, or
// waiting for the client's answers.
func (h *Handler) restRounds(ctx context.Context, r *http.Request, rec seal.RESTCall, call sagaCall, progress *restProgress) seal.RESTCall {
	fail := func(code int, format string, args ...any) seal.RESTCall {
		rec.Status = restFailed
		rec.Error, _ = json.Marshal(restError{Code: int64(code), Message: fmt.Sprintf(format, args...)})
		return rec
	}
	for range max(h.Parking.MaxRounds, 1) {
		status, answer, failure := h.restRPC(ctx, r, "tools/call", call.name, call.callParams(restToolCallMeta), progress)
		switch {
		case errors.Is(context.Cause(ctx), errRESTCanceled):
			rec.Status = restCanceled
			return rec
		case ctx.Err() != nil:
			return fail(-32603, "the gateway instance running the call stopped")
		case failure != nil:
			return fail(-32603, "%s (HTTP %d)", failure.detail, failure.status)
		}
		if e := answer.Get("error"); e.Exists() {
			rec.Status, rec.Error = restFailed, json.RawMessage(e.Raw)
			if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
				rec.Error = json.RawMessage(jsonSetHTTPStatus(e.Raw, status))
			}
			return rec
		}
		result := answer.Get("result")
		if result.Get("resultType").String() != "input_required" {
			if limit := min(h.Tasks.MaxResult, seal.MaxRESTPayload); int64(len(result.Raw)) > limit {
				return fail(-32603, "the tool's result is larger than max_task_result (%d bytes)", limit)
			}
			rec.Status, rec.Result = restSuccess, json.RawMessage(result.Raw)
			if result.Get("isError").Bool() {
				rec.Status = restFailed
			}
			return rec
		}
		inputs, err := h.restInputs(ctx, rec.Principal, result.Get("inputRequests"))
		if err != nil {
			return fail(-32603, "%v", err)
		}
		state := result.Get("requestState").String()
		if len(state) > seal.MaxRESTState {
			return fail(-32603, "the tool's requestState is larger than a call record holds")
		}
		rec.Inputs, rec.RequestState = inputs, state
		if q := pendingInput(&rec); q >= 0 {
			rec.Status = restAwaitStatus(inputs[q].Method)
			return rec
		}
		// Roots only (or a bare requestState): answered here.
		call = restRetry(rec)
		rec.Inputs, rec.RequestState = nil, ""
	}
	return fail(-32603, "the tool asked for roots more than max_rounds times in a row")
}

// jsonSetHTTPStatus adds the HTTP status to an error object's data, so
// that a client tells a refusal to try later (429, 503) from the tool's.
func jsonSetHTTPStatus(obj string, status int) string {
	if gjson.Get(obj, "data").Exists() {
		return obj
	}
	return jsonrpc.SetMember(obj, "data", `{"httpStatus":`+strconv.Itoa(status)+`}`)
}

// restInputs reads a round's inputRequests, in key order; roots
// questions are answered at once, with the principal's roots.
func (h *Handler) restInputs(ctx context.Context, princ [16]byte, reqs gjson.Result) ([]seal.RESTInput, error) {
	if reqs.Exists() && !reqs.IsObject() {
		return nil, errors.New("the tool's inputRequests is not an object")
	}
	var inputs []seal.RESTInput
	var err error
	reqs.ForEach(func(k, v gjson.Result) bool {
		method := v.Get("method").String()
		switch {
		case !translate.IsInputMethod(method):
			err = fmt.Errorf("the tool asked for input the REST face cannot carry (%q)", clipText(method, 64))
		case k.Str == "" || len(k.Str) > seal.MaxRESTShort:
			err = fmt.Errorf("an input request's key is empty or longer than %d bytes", seal.MaxRESTShort)
		case len(inputs) == seal.MaxRESTInputs:
			err = fmt.Errorf("the tool asked more than %d questions at once", seal.MaxRESTInputs)
		case len(v.Get("params").Raw) > seal.MaxRESTParams:
			err = errors.New("an input request is too large")
		}
		if err != nil {
			return false
		}
		in := seal.RESTInput{Key: k.Str, Method: method}
		if p := v.Get("params"); p.Exists() {
			in.Params = json.RawMessage(p.Raw)
		}
		inputs = append(inputs, in)
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(inputs, func(a, b seal.RESTInput) int { return strings.Compare(a.Key, b.Key) })
	var roots json.RawMessage
	for i := range inputs {
		if inputs[i].Method != translate.MethodListRoots {
			continue
		}
		if roots == nil {
			roots = h.restRoots(ctx, princ)
		}
		inputs[i].Answer = roots
	}
	return inputs, nil
}

// restKeepLease renews the lease of the running record at key every
// third of task_lease, while the run goes on; it stops the run when the
// record changed under it (cancelled from another instance). The
// returned func stops the renewal.
func (h *Handler) restKeepLease(ctx context.Context, key, etag string, run *restRun) (stop func()) {
	princ := run.princ
	lease := time.Duration(h.Tasks.Lease)
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := time.Now()
			err := h.rest.withLock(ctx, key, func(sctx context.Context) error {
				cur, err := h.restLoad(sctx, key, princ, now)
				if err != nil || cur.ETag != etag {
					run.cancel(errRESTCanceled)
					return nil
				}
				cur.Lease = now.Add(lease).UnixMilli()
				if p := run.progress.get(); len(p) > 0 && len(p) <= seal.MaxRESTParams {
					cur.Progress = p
				}
				return h.restSave(sctx, key, cur)
			})
			if err != nil && ctx.Err() == nil {
				h.logger.Warn("REST face: a call's lease could not be renewed", zap.Error(err))
			}
		}
	}()
	return func() { cancel(); <-finished }
}

// restFinish writes out, the outcome of the run of the record whose
// running etag is etag, unless the record changed meanwhile (cancelled):
// then the record stays as it is. It returns the record as it is now.
func (h *Handler) restFinish(key, etag string, out seal.RESTCall) (seal.RESTCall, error) {
	now, princ := time.Now(), out.Principal
	var final seal.RESTCall
	err := h.rest.withLock(context.Background(), key, func(sctx context.Context) error {
		cur, err := h.restLoad(sctx, key, princ, now)
		if err == nil && cur.ETag != etag {
			final = cur
			return nil
		}
		out = restOutcome(out, now)
		if err := h.restSave(sctx, key, out); err != nil {
			if !errors.Is(err, seal.ErrRESTTooLarge) {
				return err
			}
			out.Status, out.Result, out.Inputs, out.RequestState = restFailed, nil, nil, ""
			out.Error = json.RawMessage(`{"code":-32603,"message":"the call's outcome is larger than a call record holds"}`)
			if err := h.restSave(sctx, key, out); err != nil {
				return err
			}
		}
		final = out
		return nil
	})
	return final, err
}
