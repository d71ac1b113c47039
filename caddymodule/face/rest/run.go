package rest

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

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
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

// fastWindow bounds how long a PUT or an advance holds the record's
// lock while the call runs: a call that ends (or asks) within it has its
// record written once, with its outcome; a longer one is written
// running, and goes on in the background.
const fastWindow = 500 * time.Millisecond

// start starts call for rec (running; its etag the running one) as
// the run of key on this instance (errBusy beyond
// rest_max_calls_per_principal), owned here from now, while the caller
// holds the record's lock, and waits up to the fast window (at most
// rest_wait). It returns the record to write now: the outcome (with a new
// etag) when the call ended or asked within it, else rec; then pending is
// the outcome to come, for continueRun.
func (f *Face) start(ctx context.Context, r *http.Request, key string, rec seal.RESTCall, call face.ToolCall, run *running, now time.Time) (seal.RESTCall, <-chan seal.RESTCall, error) {
	rec.Owner, rec.Lease = f.gw.Instance(), now.Add(f.gw.Limits().Lease).UnixMilli()
	run.task.set(rec.TaskID) // a round of a task (carry.go)
	if err := runs.start(key, run, f.cfg.MaxCallsPerPrincipal); err != nil {
		return rec, nil, err
	}
	// Stopped when Caddy exits, whose stop waits until the run's record is
	// written (runTable.end).
	run.untrack = f.gw.Track(run.cancel)
	out := make(chan seal.RESTCall, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				f.gw.Logger().Error("REST face: a call panicked", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
				failed := rec
				failed.Status, failed.Error = statusFailed, json.RawMessage(`{"code":-32603,"message":"the gateway failed making the call"}`)
				out <- failed
			}
		}()
		out <- f.rounds(ctx, r, rec, call, run)
	}()
	t := time.NewTimer(min(fastWindow, time.Duration(f.cfg.Wait)))
	defer t.Stop()
	select {
	case o := <-out:
		run.cancel(nil)
		return outcome(o, time.Now()), nil, nil
	case <-t.C:
		rec.TaskID = run.task.get() // the record names the task from the start
		return rec, out, nil
	}
}

// outcome is the record of an outcome as written at now: a new etag,
// no owner; or, for a call handed over (still running, carry.go), the
// record as it is, its lease lapsed.
func outcome(o seal.RESTCall, now time.Time) seal.RESTCall {
	if o.Status == statusRunning {
		return o
	}
	o.ETag, o.Updated, o.Owner, o.Lease = newETag(), now.UnixMilli(), "", 0
	return o
}

// continueRun follows a call start left running (its record written
// running with etag): it renews the record's lease until the outcome
// comes, writes it, and sends the record as written on done.
func (f *Face) continueRun(key, etag string, pending <-chan seal.RESTCall, run *running, done chan<- seal.RESTCall) {
	defer runs.end(key, run)
	defer run.cancel(nil)
	stopLease := f.keepLease(context.Background(), key, etag, run)
	out := <-pending
	stopLease()
	final, err := f.finish(key, etag, out)
	if err != nil {
		f.gw.Logger().Warn("REST face: the call's outcome could not be written", zap.String("tool", out.Tool), zap.Error(err))
		final = outcome(out, time.Now())
	}
	done <- final
}

// Why rounds ends a call before it has its answer.
var (
	// errStopped: the call's context ended (Caddy exits).
	errStopped = errors.New("the gateway instance running the call stopped")
	// errStateTooLarge: a requestState a record cannot hold.
	errStateTooLarge = errors.New("the tool's requestState is larger than a call record holds")
)

// rounds makes the call and the rounds the gateway answers itself
// (roots), and returns the record as it should read after: ended, or
// waiting for the client's answers.
func (f *Face) rounds(ctx context.Context, r *http.Request, rec seal.RESTCall, call face.ToolCall, run *running) seal.RESTCall {
	fail := func(code int, format string, args ...any) seal.RESTCall {
		rec.Status = statusFailed
		rec.Error, _ = json.Marshal(callError{Code: int64(code), Message: fmt.Sprintf(format, args...)})
		return rec
	}
	a, _, err := face.Drive(f.gw.Limits().MaxRounds, call,
		func(c face.ToolCall) (face.Answer, error) {
			a, err := f.step(ctx, r, &rec, c, run) // carry.go
			switch {
			case errors.Is(context.Cause(ctx), errCanceled):
				return a, errCanceled
			case ctx.Err() != nil:
				return a, errStopped
			}
			return a, err
		},
		func(a face.Answer) (map[string]json.RawMessage, bool, error) {
			result := a.Result()
			inputs, err := f.inputs(ctx, rec.Principal, result.Get("inputRequests"))
			if err != nil {
				return nil, false, err
			}
			state := result.Get("requestState").String()
			if len(state) > seal.MaxRESTState {
				return nil, false, errStateTooLarge
			}
			rec.Inputs, rec.RequestState = inputs, state
			if pendingInput(&rec) >= 0 {
				return nil, false, nil // the client's questions
			}
			// Roots only (or a bare requestState): answered here.
			retry := retryOf(rec)
			rec.Inputs, rec.RequestState = nil, ""
			return retry.Responses, true, nil
		})
	var failure *face.Failure
	switch {
	case errors.Is(err, errCanceled):
		rec.Status = statusCanceled
		if rec.TaskID != "" {
			go f.cancelTask(r, rec.TaskID)
		}
		return rec
	case errors.Is(err, errStopped) && rec.TaskID != "":
		// Handed over: the task goes on (the bridge hands it over as the
		// gateway stops), and any instance adopts the call at once.
		rec.Lease = time.Now().UnixMilli()
		return rec
	case errors.As(err, &failure):
		return fail(-32603, "%s (HTTP %d)", failure.Detail, failure.Status)
	case errors.Is(err, face.ErrTooManyRounds):
		return fail(-32603, "the tool asked for roots more than max_rounds times in a row")
	case err != nil:
		return fail(-32603, "%v", err)
	}
	if e, ok := a.Error(); ok {
		rec.Status, rec.Error = statusFailed, json.RawMessage(e.Raw)
		if a.Status == http.StatusTooManyRequests || a.Status == http.StatusServiceUnavailable {
			rec.Error = json.RawMessage(jsonSetHTTPStatus(e.Raw, a.Status))
		}
		return rec
	}
	if a.InputRequired() {
		rec.Status = awaitStatus(rec.Inputs[pendingInput(&rec)].Method)
		return rec
	}
	result := a.Result()
	if limit := min(f.gw.Limits().MaxResult, seal.MaxRESTPayload); int64(len(result.Raw)) > limit {
		return fail(-32603, "the tool's result is larger than max_task_result (%d bytes)", limit)
	}
	// An isError result is the tool's answer too: success, as a task's
	// completed and the other faces' result.
	rec.Status, rec.Result = statusSuccess, json.RawMessage(result.Raw)
	return rec
}

// jsonSetHTTPStatus adds the HTTP status to an error object's data, so
// that a client tells a refusal to try later (429, 503) from the tool's.
func jsonSetHTTPStatus(obj string, status int) string {
	if gjson.Get(obj, "data").Exists() {
		return obj
	}
	return jsonrpc.SetMember(obj, "data", `{"httpStatus":`+strconv.Itoa(status)+`}`)
}

// inputs reads a round's inputRequests, in key order; roots
// questions are answered at once, with the principal's roots.
func (f *Face) inputs(ctx context.Context, princ [16]byte, reqs gjson.Result) ([]seal.RESTInput, error) {
	if reqs.Exists() && !reqs.IsObject() {
		return nil, errors.New("the tool's inputRequests is not an object")
	}
	var inputs []seal.RESTInput
	var err error
	reqs.ForEach(func(k, v gjson.Result) bool {
		method := v.Get("method").String()
		switch {
		case !translate.IsInputMethod(method):
			err = fmt.Errorf("the tool asked for input the REST face cannot carry (%q)", clip(method, 64))
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
			roots = f.roots(ctx, princ)
		}
		inputs[i].Answer = roots
	}
	return inputs, nil
}

// keepLease renews the lease of the running record at key every
// third of task_lease, while the run goes on; it stops the run when the
// record changed under it (cancelled from another instance). The
// returned func stops the renewal.
func (f *Face) keepLease(ctx context.Context, key, etag string, run *running) (stop func()) {
	princ := run.princ
	lease := f.gw.Limits().Lease
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
			err := f.withLock(ctx, key, func(sctx context.Context) error {
				cur, err := f.load(sctx, key, princ, now)
				if err != nil || cur.ETag != etag {
					run.cancel(errCanceled)
					return nil
				}
				cur.Lease = now.Add(lease).UnixMilli()
				if id := run.task.get(); id != "" {
					cur.TaskID = id
				}
				if p := run.progress.get(); len(p) > 0 && len(p) <= seal.MaxRESTParams {
					cur.Progress = p
				}
				return f.save(sctx, key, cur)
			})
			if err != nil && ctx.Err() == nil {
				f.gw.Logger().Warn("REST face: a call's lease could not be renewed", zap.Error(err))
			}
		}
	}()
	return func() { cancel(); <-finished }
}

// finish writes out, the outcome of the run of the record whose
// running etag is etag, unless the record changed meanwhile (cancelled):
// then the record stays as it is. It returns the record as it is now.
func (f *Face) finish(key, etag string, out seal.RESTCall) (seal.RESTCall, error) {
	now, princ := time.Now(), out.Principal
	var final seal.RESTCall
	err := f.withLock(context.Background(), key, func(sctx context.Context) error {
		cur, err := f.load(sctx, key, princ, now)
		if err == nil && cur.ETag != etag {
			final = cur
			return nil
		}
		out = outcome(out, now)
		if err := f.save(sctx, key, out); err != nil {
			if !errors.Is(err, seal.ErrRESTTooLarge) {
				return err
			}
			out.Status, out.Result, out.Inputs, out.RequestState = statusFailed, nil, nil, ""
			out.Error = json.RawMessage(`{"code":-32603,"message":"the call's outcome is larger than a call record holds"}`)
			if err := f.save(sctx, key, out); err != nil {
				return err
			}
		}
		final = out
		return nil
	})
	return final, err
}
