package rest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file is the call resource as clients see it (SEP-1597's tool call
// JSON), made from a call's record.

// The statuses of a call.
const (
	statusSubmitted        = "submitted"
	statusRunning          = "running"
	statusAwaitElicitation = "awaitingElicitationResult"
	statusAwaitSampling    = "awaitingSamplingResult"
	statusSuccess          = "success"
	statusFailed           = "failed"
	statusCanceled         = "canceled"
)

// retryAfterSeconds is the Retry-After of a call that runs.
const retryAfterSeconds = "1"

// statuses are the statuses a list may be filtered by.
var statuses = map[string]bool{
	statusSubmitted: true, statusRunning: true, statusAwaitElicitation: true, statusAwaitSampling: true,
	statusSuccess: true, statusFailed: true, statusCanceled: true,
}

// terminal reports whether status is an end.
func terminal(status string) bool {
	return status == statusSuccess || status == statusFailed || status == statusCanceled
}

// callView is the call resource.
type callView struct {
	ToolName string `json:"toolname"`
	ID       string `json:"id"`
	ETag     string `json:"etag"`
	Status   string `json:"status"`
	// Request is the PUT body that started the call.
	Request callRequest `json:"request"`
	// The question the call waits the answer of, while awaiting: its
	// params, and its key among the round's questions (inputKey, with
	// inputsPending the questions of the round still unanswered, this one
	// included).
	ElicitationRequest json.RawMessage `json:"elicitationRequest,omitempty"`
	SamplingRequest    json.RawMessage `json:"samplingRequest,omitempty"`
	InputKey           string          `json:"inputKey,omitempty"`
	InputsPending      int             `json:"inputsPending,omitempty"`
	// Progress is the last progress notification's params while the
	// call runs.
	Progress json.RawMessage `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    json.RawMessage `json:"error,omitempty"`
	Created  string          `json:"created"`
	Updated  string          `json:"updated"`
}

// callRequest is the body of the PUT that started a call.
type callRequest struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// callSummary is a call in a list.
type callSummary struct {
	ToolName string `json:"toolname"`
	ID       string `json:"id"`
	ETag     string `json:"etag"`
	Status   string `json:"status"`
	Created  string `json:"created"`
	Updated  string `json:"updated"`
}

// errLost is the error of a call whose running instance was lost, and
// that no other instance can carry on (carry.go).
var errLost = json.RawMessage(`{"code":-32603,"message":"the gateway instance running the call was lost, and the call could not be carried over (it ran on a modern server, which holds nothing the gateway can resume, or it was not a task the gateway hosts): start the call again"}`)

// seen is c as it reads at now: a running call whose owner's lease
// lapsed reads as failed (its instance was lost) unless it names a task,
// which the instance that reads it adopts (carry.go); a call that failed
// with a result and no error (an isError result, as instances of
// earlier versions wrote it) reads as the success it is.
//
// A running call's progress is part of its etag as seen (the record's own
// etag changes only on transitions, which is what a run checks to learn
// that its call was cancelled): a poll with If-None-Match sees new
// progress.
func seen(c seal.RESTCall, now time.Time) seal.RESTCall {
	if c.Status == statusRunning && c.TaskID == "" && c.Lease != 0 && now.After(c.LeaseUntil()) {
		c.Status, c.Error, c.Owner, c.Lease, c.Progress = statusFailed, errLost, "", 0, nil
		c.ETag += "-lost"
	}
	if c.Status == statusFailed && len(c.Error) == 0 && len(c.Result) > 0 {
		c.Status = statusSuccess
	}
	if c.Status != statusRunning {
		c.Progress = nil
	} else if len(c.Progress) > 0 {
		sum := sha256.Sum256(c.Progress)
		c.ETag += "-" + hex.EncodeToString(sum[:4])
	}
	return c
}

// pendingInput is the index of the first unanswered question of c's
// round (roots are answered by the gateway), or -1.
func pendingInput(c *seal.RESTCall) int {
	for i, in := range c.Inputs {
		if len(in.Answer) == 0 && in.Method != translate.MethodListRoots {
			return i
		}
	}
	return -1
}

// view is the call resource of c.
func view(c seal.RESTCall) callView {
	v := callView{ToolName: c.Tool, ID: c.ID, ETag: c.ETag, Status: c.Status,
		Request: callRequest{Arguments: c.Arguments}, Result: c.Result, Error: c.Error, Progress: c.Progress,
		Created: c.CreatedAt().UTC().Format(time.RFC3339Nano), Updated: c.UpdatedAt().UTC().Format(time.RFC3339Nano)}
	if i := pendingInput(&c); i >= 0 && !terminal(c.Status) && c.Status != statusRunning {
		in := c.Inputs[i]
		v.InputKey = in.Key
		for _, o := range c.Inputs[i:] {
			if len(o.Answer) == 0 && o.Method != translate.MethodListRoots {
				v.InputsPending++
			}
		}
		params := in.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		if in.Method == translate.MethodSample {
			v.SamplingRequest = params
		} else {
			v.ElicitationRequest = params
		}
	}
	return v
}

// writeCall answers with c's resource, its ETag, and Retry-After while it
// runs.
func writeCall(w http.ResponseWriter, r *http.Request, status int, c seal.RESTCall) error {
	v := view(c)
	w.Header().Set("ETag", `"`+v.ETag+`"`)
	w.Header().Set("Cache-Control", "private, no-cache")
	if v.Status == statusRunning || v.Status == statusSubmitted {
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	return writeJSON(w, r, status, v)
}

// etagMatches reports whether an If-Match or If-None-Match header value
// names etag (or is "*").
func etagMatches(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || strings.Trim(t, `"`) == etag {
			return true
		}
	}
	return false
}
