package caddymodule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
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

// This file serves the call resources: PUT (start, idempotent), GET,
// advance (answer the current question, If-Match), cancel, and the list
// of a tool's calls. Each read-modify-write holds the record's storage
// lock; the call itself runs outside it (rest_run.go).

// Bounds of the list of calls.
const (
	restListDefault = 50
	restListMax     = 200
	// restListScan bounds the records a list reads.
	restListScan = 1000
)

// checkIdempotencyKey checks an Idempotency-Key: 1 to 255 visible ASCII
// characters.
func checkIdempotencyKey(k string) bool {
	if k == "" || len(k) > seal.MaxRESTShort {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// restStorageProblem answers a storage failure.
func (h *Handler) restStorageProblem(w http.ResponseWriter, err error) error {
	h.logger.Warn("REST face: storage failed", zap.Error(err))
	return writeProblem(w, http.StatusServiceUnavailable, "the call records' storage is unavailable (the gateway's log says why)")
}

// restPutCall starts a call, or answers the one the same id and key
// started.
func (h *Handler) restPutCall(w http.ResponseWriter, r *http.Request, tool, id restName) error {
	ikey := r.Header.Get("Idempotency-Key")
	if !checkIdempotencyKey(ikey) {
		return writeProblem(w, http.StatusBadRequest, "an Idempotency-Key header of 1 to 255 visible ASCII characters is required")
	}
	body, ok := h.readRESTBody(w, r, true)
	if !ok {
		return nil
	}
	var args json.RawMessage
	if body != nil {
		b := gjson.ParseBytes(body)
		a := b.Get("arguments")
		switch {
		case !b.IsObject():
			return writeProblem(w, http.StatusBadRequest, `the body must be an object: {"arguments": {...}}`)
		case !a.Exists() || a.Type == gjson.Null:
		case !a.IsObject():
			return writeProblem(w, http.StatusBadRequest, "arguments must be an object")
		case len(a.Raw) > seal.MaxRESTArguments:
			return writeProblem(w, http.StatusRequestEntityTooLarge, "arguments must be at most "+strconv.Itoa(seal.MaxRESTArguments)+" bytes")
		default:
			args = json.RawMessage(a.Raw)
		}
	}
	princ := h.principal(r)
	key := restCallKey(princ, tool, id)
	now := time.Now()
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	run := &restRun{princ: princ, cancel: cancel}
	var rec seal.RESTCall
	var pending <-chan seal.RESTCall
	var conflict, created, unknown bool
	err := h.rest.withLock(r.Context(), key, func(sctx context.Context) error {
		old, err := h.restLoad(sctx, key, princ, now)
		switch {
		case err == nil && old.IdempotencyKey != ikey:
			conflict = true
			return nil
		case err == nil:
			rec = restSeen(old, now)
			return nil
		case !errors.Is(err, errRESTNoRecord):
			return err
		}
		rec = seal.RESTCall{Principal: princ, Tool: string(tool), ID: string(id), IdempotencyKey: ikey,
			Status: restRunning, ETag: newETag(), Arguments: args, Created: now.UnixMilli(), Updated: now.UnixMilli()}
		if rec, pending, err = h.restStart(ctx, r, key, rec, sagaCall{name: rec.Tool, args: rec.Arguments}, run, now); err != nil {
			return err
		}
		created = true
		if pending == nil && restRefusedParams(rec) && h.restToolUnknown(sctx, r, string(tool)) {
			unknown = true // no record: the id stays free
			return nil
		}
		return h.restSave(sctx, key, rec)
	})
	if created && pending == nil {
		restRuns.end(key, run)
	}
	if !created {
		cancel(nil)
	}
	switch {
	case err != nil:
		return h.restLockFailed(w, err, key, run, pending)
	case conflict:
		return writeProblem(w, http.StatusConflict, "a call with this id exists, started with another Idempotency-Key")
	case unknown:
		return writeProblem(w, http.StatusNotFound, "no tool of that name in tools/list")
	case !created:
		return writeCall(w, r, http.StatusOK, rec)
	}
	w.Header().Set("Location", r.URL.EscapedPath())
	if pending == nil {
		return writeCall(w, r, http.StatusCreated, rec)
	}
	return h.restAwait(w, r, http.StatusCreated, key, rec, pending, run, now)
}

// restLockFailed answers a PUT or an advance whose step under the record's
// lock failed: too many calls running (429), or the storage (the call
// started, if it did, is stopped: its record could not be written).
func (h *Handler) restLockFailed(w http.ResponseWriter, err error, key string, run *restRun, pending <-chan seal.RESTCall) error {
	if errors.Is(err, errRESTBusy) {
		w.Header().Set("Retry-After", restRetryAfterSeconds)
		return writeProblem(w, http.StatusTooManyRequests, "too many calls of yours are running on this instance (rest_max_calls_per_principal)")
	}
	if pending != nil {
		run.cancel(errRESTCanceled)
		go func() {
			<-pending
			restRuns.end(key, run)
		}()
	}
	return h.restStorageProblem(w, err)
}

// restRefusedParams reports whether c failed at once with -32602 or
// -32601: an unknown tool's answer (or invalid arguments, which
// restToolUnknown tells apart).
func restRefusedParams(c seal.RESTCall) bool {
	code := gjson.GetBytes(c.Error, "code")
	return c.Status == restFailed && code.Exists() && (code.Int() == jsonrpc.InvalidParams || code.Int() == jsonrpc.MethodNotFound)
}

// restAwait follows the call restStart left running (pending, restContinue)
// and waits for its next state until rest_wait after start (when the
// request came), then answers with status and the state it has then.
func (h *Handler) restAwait(w http.ResponseWriter, r *http.Request, status int, key string, rec seal.RESTCall, pending <-chan seal.RESTCall, run *restRun, start time.Time) error {
	done := make(chan seal.RESTCall, 1)
	go h.restContinue(key, rec.ETag, pending, run, done)
	t := time.NewTimer(time.Duration(h.REST.Wait) - time.Since(start))
	defer t.Stop()
	select {
	case c := <-done:
		rec = c
	case <-t.C:
	case <-r.Context().Done():
		return nil
	}
	return writeCall(w, r, status, rec)
}

// restGetCall answers a call's current state.
func (h *Handler) restGetCall(w http.ResponseWriter, r *http.Request, tool, id restName) error {
	now, princ := time.Now(), h.principal(r)
	c, err := h.restLoad(r.Context(), restCallKey(princ, tool, id), princ, now)
	switch {
	case errors.Is(err, errRESTNoRecord):
		return writeProblem(w, http.StatusNotFound, "no such call")
	case err != nil:
		return h.restStorageProblem(w, err)
	}
	c = restSeen(c, now)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, c.ETag) {
		w.Header().Set("ETag", `"`+c.ETag+`"`)
		if c.Status == restRunning {
			w.Header().Set("Retry-After", restRetryAfterSeconds)
		}
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeCall(w, r, http.StatusOK, c)
}

// restAdvance answers the current question of a call waiting for input;
// the last answer of a round retries the tool call.
func (h *Handler) restAdvance(w http.ResponseWriter, r *http.Request, tool, id restName) error {
	body, ok := h.readRESTBody(w, r, false)
	if !ok {
		return nil
	}
	ifMatch := r.Header.Get("If-Match")
	princ := h.principal(r)
	key := restCallKey(princ, tool, id)
	now := time.Now()
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	run := &restRun{princ: princ, cancel: cancel}
	var rec seal.RESTCall
	var pending <-chan seal.RESTCall
	var problemStatus int
	var problemDetail string
	var retry *sagaCall
	err := h.rest.withLock(r.Context(), key, func(sctx context.Context) error {
		cur, err := h.restLoad(sctx, key, princ, now)
		if errors.Is(err, errRESTNoRecord) {
			problemStatus, problemDetail = http.StatusNotFound, "no such call"
			return nil
		}
		if err != nil {
			return err
		}
		cur = restSeen(cur, now)
		if ifMatch != "" && !etagMatches(ifMatch, cur.ETag) {
			problemStatus, problemDetail = http.StatusPreconditionFailed, "the call changed (its etag is not the one in If-Match): GET it again"
			return nil
		}
		q := pendingInput(&cur)
		if q < 0 || restTerminal(cur.Status) || cur.Status == restRunning {
			problemStatus, problemDetail = http.StatusConflict, "the call is "+cur.Status+", not awaiting an answer"
			return nil
		}
		if err := translate.ValidateInputResponse(cur.Inputs[q].Method, body); err != nil {
			problemStatus, problemDetail = http.StatusBadRequest, "the answer does not fit the question: "+err.Error()
			return nil
		}
		if len(body) > seal.MaxRESTParams {
			problemStatus, problemDetail = http.StatusRequestEntityTooLarge, "the answer is too large"
			return nil
		}
		cur.Inputs[q].Answer = json.RawMessage(body)
		cur.ETag, cur.Updated = newETag(), now.UnixMilli()
		if q2 := pendingInput(&cur); q2 >= 0 {
			cur.Status = restAwaitStatus(cur.Inputs[q2].Method)
			rec = cur
			return h.restSave(sctx, key, cur)
		}
		call := restRetry(cur)
		cur.Status, cur.Inputs, cur.RequestState = restRunning, nil, ""
		if rec, pending, err = h.restStart(ctx, r, key, cur, call, run, now); err != nil {
			return err
		}
		retry = &call
		return h.restSave(sctx, key, rec)
	})
	if retry == nil {
		cancel(nil)
	} else if pending == nil {
		restRuns.end(key, run)
	}
	switch {
	case err != nil:
		return h.restLockFailed(w, err, key, run, pending)
	case problemStatus != 0:
		return writeProblem(w, problemStatus, problemDetail)
	case pending == nil:
		return writeCall(w, r, http.StatusOK, rec)
	}
	return h.restAwait(w, r, http.StatusOK, key, rec, pending, run, now)
}

// restRetry is the retry of c's round: its tool call with the round's
// requestState and c's answers, one under each question's key.
func restRetry(c seal.RESTCall) sagaCall {
	call := sagaCall{name: c.Tool, args: c.Arguments, state: c.RequestState, responses: make(map[string]json.RawMessage, len(c.Inputs))}
	for _, in := range c.Inputs {
		call.responses[in.Key] = in.Answer
	}
	return call
}

// restAwaitStatus is the status of a call waiting for an answer to a
// question of method.
func restAwaitStatus(method string) string {
	if method == translate.MethodSample {
		return restAwaitSampling
	}
	return restAwaitElicitation
}

// errRESTCanceled stops a call its client cancelled.
var errRESTCanceled = errors.New("the call was canceled by its client")

// restCancel cancels a call that has not ended: its record says canceled
// at once; its run stops now if it runs here, else when its owner next
// renews its lease (the owner sees the record changed).
func (h *Handler) restCancel(w http.ResponseWriter, r *http.Request, tool, id restName) error {
	princ := h.principal(r)
	key := restCallKey(princ, tool, id)
	now := time.Now()
	var rec, waiting seal.RESTCall
	found := false
	err := h.rest.withLock(r.Context(), key, func(sctx context.Context) error {
		cur, err := h.restLoad(sctx, key, princ, now)
		if errors.Is(err, errRESTNoRecord) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		cur = restSeen(cur, now)
		if restTerminal(cur.Status) {
			rec = cur
			return nil
		}
		waiting = cur
		cur.Status, cur.Inputs, cur.RequestState, cur.Owner, cur.Lease = restCanceled, nil, "", "", 0
		cur.ETag, cur.Updated = newETag(), now.UnixMilli()
		rec = cur
		return h.restSave(sctx, key, cur)
	})
	switch {
	case err != nil:
		return h.restStorageProblem(w, err)
	case !found:
		return writeProblem(w, http.StatusNotFound, "no such call")
	}
	if restRuns.stop(key, errRESTCanceled) {
		h.logger.Debug("REST face: stopped a cancelled call running here", zap.String("tool", string(tool)))
	}
	if call, ok := restDismissal(waiting); ok {
		go h.restDismiss(r, waiting, call) // rest_dismiss.go
	}
	return writeCall(w, r, http.StatusOK, rec)
}

// restListCalls answers the caller's calls of a tool, newest first:
// `?status=` and `?createdAfter=` (an RFC 3339 time or a date) filter,
// `?limit=` bounds (default 50, at most 200).
func (h *Handler) restListCalls(w http.ResponseWriter, r *http.Request, tool restName) error {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !restStatuses[status] {
		return writeProblem(w, http.StatusBadRequest, "status must be one of submitted, running, awaitingElicitationResult, awaitingSamplingResult, success, failed, canceled")
	}
	var after time.Time
	if s := q.Get("createdAfter"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			if t, err = time.Parse(time.DateOnly, s); err != nil {
				return writeProblem(w, http.StatusBadRequest, "createdAfter must be an RFC 3339 time or a date (2006-01-02)")
			}
		}
		after = t
	}
	limit := restListDefault
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > restListMax {
			return writeProblem(w, http.StatusBadRequest, "limit must be 1 to "+strconv.Itoa(restListMax))
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), restStoreTimeout)
	defer cancel()
	princ := h.principal(r)
	keys, err := h.rest.storage.List(ctx, restToolPrefix(princ, tool), false)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return h.restStorageProblem(w, err)
	}
	if len(keys) > restListScan {
		keys = keys[:restListScan]
	}
	now := time.Now()
	calls := make([]seal.RESTCall, 0, len(keys))
	for _, k := range keys {
		c, err := h.restLoad(ctx, k, princ, now)
		if err != nil {
			continue
		}
		if c = restSeen(c, now); (status == "" || c.Status == status) && c.CreatedAt().After(after) {
			calls = append(calls, c)
		}
	}
	slices.SortFunc(calls, func(a, b seal.RESTCall) int {
		if a.Created != b.Created {
			return cmp.Compare(b.Created, a.Created)
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := struct {
		Calls []restCallSummary `json:"calls"`
	}{Calls: make([]restCallSummary, 0, min(len(calls), limit))}
	for _, c := range calls[:min(len(calls), limit)] {
		out.Calls = append(out.Calls, restCallSummary{ToolName: c.Tool, ID: c.ID, ETag: c.ETag, Status: c.Status,
			Created: c.CreatedAt().UTC().Format(time.RFC3339Nano), Updated: c.UpdatedAt().UTC().Format(time.RFC3339Nano)})
	}
	w.Header().Set("Cache-Control", "private, no-cache")
	return writeRESTJSON(w, r, http.StatusOK, out)
}
