package rest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file serves the call resources: PUT (start, idempotent), GET,
// advance (answer the current question, If-Match), cancel, and the list
// of a tool's calls. Each read-modify-write holds the record's storage
// lock; the call itself runs outside it (run.go).

// Bounds of the list of calls.
const (
	listDefault = 50
	listMax     = 200
	// listScan bounds the records a list reads.
	listScan = 1000
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

// storageProblem answers a storage failure.
func (f *Face) storageProblem(w http.ResponseWriter, err error) error {
	f.gw.Logger().Warn("REST face: storage failed", zap.Error(err))
	return writeProblem(w, http.StatusServiceUnavailable, "the call records' storage is unavailable (the gateway's log says why)")
}

// putCall starts a call, or answers the one the same id and key
// started.
func (f *Face) putCall(w http.ResponseWriter, r *http.Request, tool, id pathName) error {
	ikey := r.Header.Get("Idempotency-Key")
	if !checkIdempotencyKey(ikey) {
		return writeProblem(w, http.StatusBadRequest, "an Idempotency-Key header of 1 to 255 visible ASCII characters is required")
	}
	body, ok := f.readBody(w, r, true)
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
	princ := f.gw.Principal(r)
	key := f.callKey(princ, tool, id)
	now := time.Now()
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	run := &running{princ: princ, cancel: cancel}
	var rec seal.RESTCall
	var pending <-chan seal.RESTCall
	var conflict, created, unknown bool
	err := f.withLock(r.Context(), key, func(sctx context.Context) error {
		old, err := f.load(sctx, key, princ, now)
		switch {
		case err == nil && old.IdempotencyKey != ikey:
			conflict = true
			return nil
		case err == nil:
			rec = seen(old, now)
			f.gw.Traced(r, string(tool), rec.Trace) // the PUT again
			return nil
		case !errors.Is(err, errNoRecord):
			return err
		}
		if err := f.admit(sctx, princ, int64(len(args)), now); err != nil {
			return err
		}
		rec = seal.RESTCall{Principal: princ, Tool: string(tool), ID: string(id), IdempotencyKey: ikey,
			Status: statusRunning, ETag: newETag(), Arguments: args, Created: now.UnixMilli(), Updated: now.UnixMilli(),
			Trace: f.gw.Traced(r, string(tool), seal.TraceRef{})}
		if rec, pending, err = f.start(ctx, r, key, rec, face.ToolCall{Name: rec.Tool, Args: rec.Arguments}, run, now); err != nil {
			return err
		}
		created = true
		if pending == nil && refusedParams(rec) && f.toolUnknown(sctx, r, string(tool)) {
			unknown = true // no record: the id stays free
			return nil
		}
		return f.save(sctx, key, rec)
	})
	if created && pending == nil {
		runs.end(key, run)
	}
	if !created {
		cancel(nil)
	}
	switch {
	case err != nil:
		return f.lockFailed(w, err, key, run, pending)
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
	return f.await(w, r, http.StatusCreated, key, rec, pending, run, now)
}

// lockFailed answers a PUT or an advance whose step under the record's
// lock failed: too many calls running (429), too many records kept (429
// for the principal's, 507 for the store's), or the storage (the call
// started, if it did, is stopped: its record could not be written).
func (f *Face) lockFailed(w http.ResponseWriter, err error, key string, run *running, pending <-chan seal.RESTCall) error {
	if errors.Is(err, errBusy) {
		w.Header().Set("Retry-After", retryAfterSeconds)
		return writeProblem(w, http.StatusTooManyRequests, "too many calls of yours are running on this instance (rest_max_calls_per_principal)")
	}
	if full := (*fullError)(nil); errors.As(err, &full) {
		return writeProblem(w, full.status, full.detail)
	}
	if pending != nil {
		stopStarted(key, run, pending)
	}
	return f.storageProblem(w, err)
}

// stopStarted stops a call started (its outcome pending) whose record
// could not be written.
func stopStarted(key string, run *running, pending <-chan seal.RESTCall) {
	run.cancel(errCanceled)
	go func() {
		<-pending
		runs.end(key, run)
	}()
}

// refusedParams reports whether c failed at once with -32602 or
// -32601: an unknown tool's answer (or invalid arguments, which
// toolUnknown tells apart).
func refusedParams(c seal.RESTCall) bool {
	code := gjson.GetBytes(c.Error, "code")
	return c.Status == statusFailed && code.Exists() && (code.Int() == jsonrpc.InvalidParams || code.Int() == jsonrpc.MethodNotFound)
}

// await follows the call start left running (pending, continueRun)
// and waits for its next state until rest_wait after start (when the
// request came), then answers with status and the state it has then.
func (f *Face) await(w http.ResponseWriter, r *http.Request, status int, key string, rec seal.RESTCall, pending <-chan seal.RESTCall, run *running, start time.Time) error {
	done := make(chan seal.RESTCall, 1)
	go f.continueRun(key, rec.ETag, pending, run, done)
	t := time.NewTimer(time.Duration(f.cfg.Wait) - time.Since(start))
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

// getCall answers a call's current state.
func (f *Face) getCall(w http.ResponseWriter, r *http.Request, tool, id pathName) error {
	now, princ := time.Now(), f.gw.Principal(r)
	key := f.callKey(princ, tool, id)
	c, err := f.peek(r.Context(), key, princ, now)
	switch {
	case errors.Is(err, errNoRecord):
		return writeProblem(w, http.StatusNotFound, "no such call")
	case err != nil:
		return f.storageProblem(w, err)
	}
	if f.orphaned(key, c, now) {
		c, err = f.adopt(r, key, c) // carry.go
		switch {
		case errors.Is(err, errNoRecord):
			return writeProblem(w, http.StatusNotFound, "no such call")
		case err != nil:
			return f.storageProblem(w, err)
		}
	}
	c = seen(c, now)
	f.gw.Traced(r, string(tool), c.Trace)
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, c.ETag) {
		w.Header().Set("ETag", `"`+c.ETag+`"`)
		if c.Status == statusRunning {
			w.Header().Set("Retry-After", retryAfterSeconds)
		}
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeCall(w, r, http.StatusOK, c)
}

// advance answers the current question of a call waiting for input;
// the last answer of a round retries the tool call.
func (f *Face) advance(w http.ResponseWriter, r *http.Request, tool, id pathName) error {
	body, ok := f.readBody(w, r, false)
	if !ok {
		return nil
	}
	ifMatch := r.Header.Get("If-Match")
	princ := f.gw.Principal(r)
	key := f.callKey(princ, tool, id)
	now := time.Now()
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(r.Context()))
	run := &running{princ: princ, cancel: cancel}
	var rec seal.RESTCall
	var pending <-chan seal.RESTCall
	var problemStatus int
	var problemDetail string
	var retry *face.ToolCall
	found, err := f.withRecord(r.Context(), key, princ, now, func(sctx context.Context, cur seal.RESTCall) error {
		cur.Trace = f.gw.Traced(r, string(tool), cur.Trace) // a record older than traces: this request's from now
		if ifMatch != "" && !etagMatches(ifMatch, cur.ETag) {
			problemStatus, problemDetail = http.StatusPreconditionFailed, "the call changed (its etag is not the one in If-Match): GET it again"
			return nil
		}
		q := pendingInput(&cur)
		if q < 0 || terminal(cur.Status) || cur.Status == statusRunning {
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
			cur.Status = awaitStatus(cur.Inputs[q2].Method)
			rec = cur
			return f.save(sctx, key, cur)
		}
		call := retryOf(cur)
		cur.Status, cur.Inputs, cur.RequestState = statusRunning, nil, ""
		var err error
		if rec, pending, err = f.start(ctx, r, key, cur, call, run, now); err != nil {
			return err
		}
		retry = &call
		return f.save(sctx, key, rec)
	})
	if retry == nil {
		cancel(nil)
	} else if pending == nil {
		runs.end(key, run)
	}
	switch {
	case err != nil:
		return f.lockFailed(w, err, key, run, pending)
	case !found:
		return writeProblem(w, http.StatusNotFound, "no such call")
	case problemStatus != 0:
		return writeProblem(w, problemStatus, problemDetail)
	case pending == nil:
		return writeCall(w, r, http.StatusOK, rec)
	}
	return f.await(w, r, http.StatusOK, key, rec, pending, run, now)
}

// retryOf is the retry of c's round: its tool call with the round's
// requestState and c's answers, one under each question's key.
func retryOf(c seal.RESTCall) face.ToolCall {
	call := face.ToolCall{Name: c.Tool, Args: c.Arguments, State: c.RequestState, Responses: make(map[string]json.RawMessage, len(c.Inputs))}
	for _, in := range c.Inputs {
		call.Responses[in.Key] = in.Answer
	}
	return call
}

// awaitStatus is the status of a call waiting for an answer to a
// question of method.
func awaitStatus(method string) string {
	if method == translate.MethodSample {
		return statusAwaitSampling
	}
	return statusAwaitElicitation
}

// errCanceled stops a call its client cancelled.
var errCanceled = errors.New("the call was canceled by its client")

// cancel cancels a call that has not ended: its record says canceled
// at once; its run stops now if it runs here, else when its owner next
// renews its lease (the owner sees the record changed).
func (f *Face) cancel(w http.ResponseWriter, r *http.Request, tool, id pathName) error {
	princ := f.gw.Principal(r)
	key := f.callKey(princ, tool, id)
	now := time.Now()
	var rec, waiting seal.RESTCall
	found, err := f.withRecord(r.Context(), key, princ, now, func(sctx context.Context, cur seal.RESTCall) error {
		f.gw.Traced(r, string(tool), cur.Trace)
		if terminal(cur.Status) {
			rec = cur
			return nil
		}
		waiting = cur
		cur.Status, cur.Inputs, cur.RequestState, cur.Owner, cur.Lease = statusCanceled, nil, "", "", 0
		cur.ETag, cur.Updated = newETag(), now.UnixMilli()
		rec = cur
		return f.save(sctx, key, cur)
	})
	switch {
	case err != nil:
		return f.storageProblem(w, err)
	case !found:
		return writeProblem(w, http.StatusNotFound, "no such call")
	}
	if runs.stop(key, errCanceled) {
		f.gw.Logger().Debug("REST face: stopped a cancelled call running here", zap.String("tool", string(tool)))
	}
	if call, ok := dismissal(waiting); ok {
		go f.dismiss(r, waiting, call) // dismiss.go
	} else if waiting.TaskID != "" {
		go f.cancelTask(r, waiting.TaskID) // carry.go
	}
	return writeCall(w, r, http.StatusOK, rec)
}

// deleteCall deletes the record of a call that has ended (204), so that
// its room is free at once and its id can be used again; a call that has
// not ended is refused (409: cancel it first).
func (f *Face) deleteCall(w http.ResponseWriter, r *http.Request, tool, id pathName) error {
	princ := f.gw.Principal(r)
	key := f.callKey(princ, tool, id)
	now := time.Now()
	var problemStatus int
	var problemDetail string
	found, err := f.withRecord(r.Context(), key, princ, now, func(sctx context.Context, cur seal.RESTCall) error {
		f.gw.Traced(r, string(tool), cur.Trace)
		if !terminal(cur.Status) {
			problemStatus, problemDetail = http.StatusConflict, "the call is "+cur.Status+": cancel it (POST …/cancel) before deleting it"
			return nil
		}
		if err := f.storage.Delete(sctx, key); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("deleting the call's record: %w", err)
		}
		versions.note(key, cur.Version+1) // the deleted record written back is refused here
		return nil
	})
	switch {
	case err != nil:
		return f.storageProblem(w, err)
	case !found:
		return writeProblem(w, http.StatusNotFound, "no such call")
	case problemStatus != 0:
		return writeProblem(w, problemStatus, problemDetail)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listCalls answers the caller's calls of a tool, newest first:
// `?status=` and `?createdAfter=` (an RFC 3339 time or a date) filter,
// `?limit=` bounds (default 50, at most 200).
func (f *Face) listCalls(w http.ResponseWriter, r *http.Request, tool pathName) error {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !statuses[status] {
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
	limit := listDefault
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > listMax {
			return writeProblem(w, http.StatusBadRequest, "limit must be 1 to "+strconv.Itoa(listMax))
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	princ := f.gw.Principal(r)
	now := time.Now()
	keys, err := f.listed(ctx, f.toolPrefix(princ, tool), after, now)
	if err != nil {
		return f.storageProblem(w, err)
	}
	// keys are newest written first, and a record is created no later than
	// it is written: once limit calls are found created after the next
	// key's write, no other key holds a newer call.
	page := make([]seal.RESTCall, 0, limit)
	for _, k := range keys {
		if len(page) == limit && k.modified.Add(listSkew).Before(page[limit-1].CreatedAt()) {
			break
		}
		c, err := f.peek(ctx, k.key, princ, now)
		if err != nil {
			continue
		}
		if c = seen(c, now); (status == "" || c.Status == status) && c.CreatedAt().After(after) {
			page = addNewest(page, summaryOf(c), limit)
		}
	}
	out := struct {
		Calls []callSummary `json:"calls"`
	}{Calls: make([]callSummary, 0, len(page))}
	for _, c := range page {
		out.Calls = append(out.Calls, callSummary{ToolName: c.Tool, ID: c.ID, ETag: c.ETag, Status: c.Status,
			Created: c.CreatedAt().UTC().Format(time.RFC3339Nano), Updated: c.UpdatedAt().UTC().Format(time.RFC3339Nano)})
	}
	w.Header().Set("Cache-Control", "private, no-cache")
	return writeJSON(w, r, http.StatusOK, out)
}

// listSkew is how far a record's write time (by the storage's clock) may
// precede its creation time (by the writing instance's): the clocks of
// the fleet and of the storage agree within it.
const listSkew = time.Second

// listedKey is a record's key and when it was last written.
type listedKey struct {
	key      string
	modified time.Time
}

// listed lists the records under prefix from the storage's names and
// times (no record read), newest written first: at most listScan, without
// those written before after or past rest_call_ttl (neither can be
// listed). A storage that has no times lists its records first.
func (f *Face) listed(ctx context.Context, prefix string, after, now time.Time) ([]listedKey, error) {
	keys, err := f.storage.List(ctx, prefix, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]listedKey, 0, min(len(keys), listScan))
	for _, k := range keys[:min(len(keys), listScan)] {
		st, err := f.storage.Stat(ctx, k)
		switch {
		case err != nil || !st.IsTerminal || f.stale(st.Modified, now):
			continue
		case st.Modified.IsZero():
			st.Modified = time.Unix(1<<40, 0) // unknown: read it first
		case st.Modified.Add(listSkew).Before(after):
			continue
		}
		out = append(out, listedKey{k, st.Modified})
	}
	slices.SortFunc(out, func(a, b listedKey) int { return b.modified.Compare(a.modified) })
	return out, nil
}

// summaryOf is c without its payloads (what a list shows of it).
func summaryOf(c seal.RESTCall) seal.RESTCall {
	return seal.RESTCall{Tool: c.Tool, ID: c.ID, ETag: c.ETag, Status: c.Status, Created: c.Created, Updated: c.Updated}
}

// addNewest adds c to page, the newest created first (then by id), and
// keeps at most limit.
func addNewest(page []seal.RESTCall, c seal.RESTCall, limit int) []seal.RESTCall {
	i, _ := slices.BinarySearchFunc(page, c, func(a, b seal.RESTCall) int {
		if a.Created != b.Created {
			return cmp.Compare(b.Created, a.Created)
		}
		return strings.Compare(a.ID, b.ID)
	})
	if i >= limit {
		return page
	}
	page = slices.Insert(page, i, c)
	return page[:min(len(page), limit)]
}
