package caddymodule

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
	restSubmitted         = "submitted"
	restRunning           = "running"
	restAwaitElicitation  = "awaitingElicitationResult"
	restAwaitSampling     = "awaitingSamplingResult"
	restSuccess           = "success"
	restFailed            = "failed"
	restCanceled          = "canceled"
	restRetryAfterSeconds = "1"
)

// restStatuses are the statuses a list may be filtered by.
var restStatuses = map[string]bool{
	restSubmitted: true, restRunning: true, restAwaitElicitation: true, restAwaitSampling: true,
	restSuccess: true, restFailed: true, restCanceled: true,
}

// restTerminal reports whether status is an end.
func restTerminal(status string) bool {
	return status == restSuccess || status == restFailed || status == restCanceled
}

// restCallView is the call resource.
type restCallView struct {
	ToolName string `json:"toolname"`
	ID       string `json:"id"`
	ETag     string `json:"etag"`
	Status   string `json:"status"`
	// Request is the PUT body that started the call.
	Request restCallRequest `json:"request"`
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

// restCallRequest is the body of the PUT that started a call.
type restCallRequest struct {
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// restCallSummary is a call in a list.
type restCallSummary struct {
	ToolName string `json:"toolname"`
	ID       string `json:"id"`
	ETag     string `json:"etag"`
	Status   string `json:"status"`
	Created  string `json:"created"`
	Updated  string `json:"updated"`
}

// errLost is the error of a call whose running instance was lost.
var errLost = json.RawMessage(`{"code":-32603,"message":"the gateway instance running the call was lost"}`)

// restSeen is c as it reads at now: a running call whose owner's lease
// lapsed reads as failed (its instance was lost).
//
// A running call's progress is part of its etag as seen (the record's own
// etag changes only on transitions, which is what a run checks to learn
// that its call was cancelled): a poll with If-None-Match sees new
// progress.
func restSeen(c seal.RESTCall, now time.Time) seal.RESTCall {
	if c.Status == restRunning && c.Lease != 0 && now.After(c.LeaseUntil()) {
		c.Status, c.Error, c.Owner, c.Lease, c.Progress = restFailed, errLost, "", 0, nil
		c.ETag += "-lost"
	}
	if c.Status != restRunning {
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

// restView is the call resource of c.
func restView(c seal.RESTCall) restCallView {
	v := restCallView{ToolName: c.Tool, ID: c.ID, ETag: c.ETag, Status: c.Status,
		Request: restCallRequest{Arguments: c.Arguments}, Result: c.Result, Error: c.Error, Progress: c.Progress,
		Created: c.CreatedAt().UTC().Format(time.RFC3339Nano), Updated: c.UpdatedAt().UTC().Format(time.RFC3339Nano)}
	if i := pendingInput(&c); i >= 0 && !restTerminal(c.Status) && c.Status != restRunning {
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
	v := restView(c)
	w.Header().Set("ETag", `"`+v.ETag+`"`)
	w.Header().Set("Cache-Control", "private, no-cache")
	if v.Status == restRunning || v.Status == restSubmitted {
		w.Header().Set("Retry-After", restRetryAfterSeconds)
	}
	return writeRESTJSON(w, r, status, v)
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
