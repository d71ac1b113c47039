// Package saga is the tool-call saga face, the gateway's own extension:
// tools/callSaga and tools/resumeSaga, a stateless tool-call saga, served
// as a translation onto the gateway's modern path. A callSaga becomes a
// modern tools/call the gateway makes through its own routing
// (face.Client), so relays between instances, the forward bridge in front
// of legacy servers and pass-through to modern ones all apply unchanged;
// an input_required answer becomes a suspension whose sagaToken
// (seal.SagaState) holds what the retry needs, and a resumeSaga becomes
// that retry, with the completed steps as its inputResponses.
//
// A sagaToken is single use: across every instance sharing state_key and
// Caddy's storage (face.Gateway.UseOnce), its use recorded before the
// retry goes out.
package saga

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Config turns the saga face on: its presence is the switch (JSON
// `"saga": {}`; Caddyfile `saga on`).
type Config struct{}

// Options are the face's Caddyfile options.
var Options = face.Options[Config]{"saga": face.OnOff[Config]}

// New makes the face, or nil when cfg is nil (off).
func New(_ caddy.Context, cfg *Config, gw face.Gateway) (face.Face, error) {
	if cfg == nil {
		return nil, nil
	}
	return &Face{gw: gw, client: face.Client{GW: gw}}, nil
}

// The saga's methods.
const (
	MethodCallSaga   = "tools/callSaga"
	MethodResumeSaga = "tools/resumeSaga"
)

// usePurpose names sagaTokens to face.Gateway.UseOnce.
const usePurpose = "saga"

// Face is the saga face of one handler.
type Face struct {
	gw     face.Gateway
	client face.Client
}

// Name implements face.Face.
func (*Face) Name() string { return "saga" }

// ServeMessage implements face.MessageFace: it answers the saga's methods.
func (f *Face) ServeMessage(w http.ResponseWriter, r *http.Request, m face.Message) (bool, http.ResponseWriter, error) {
	if m.Method != MethodCallSaga && m.Method != MethodResumeSaga {
		return false, w, nil
	}
	return true, w, f.serve(w, r, m.Body)
}

// invalid is a -32602 answer of the saga face.
func invalid(format string, args ...any) *jsonrpc.RPCError {
	return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: "+format, args...)
}

// serve answers a tools/callSaga or tools/resumeSaga POST.
func (f *Face) serve(w http.ResponseWriter, r *http.Request, body []byte) error {
	msg, err := jsonrpc.Peek(body)
	if err != nil {
		var re *jsonrpc.RPCError
		if !errors.As(err, &re) {
			re = jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: %v", err)
		}
		return jsonrpc.WriteError(w, msg.ID, re)
	}
	if msg.Kind != jsonrpc.KindRequest {
		return jsonrpc.WriteError(w, msg.ID, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest,
			"Invalid Request: %s must be a request with an id", msg.Method))
	}
	params := gjson.GetBytes(body, "params")
	if !params.IsObject() {
		return jsonrpc.WriteError(w, msg.ID, invalid("params must be an object"))
	}
	if msg.Method == MethodCallSaga {
		return f.callSaga(w, r, msg.ID, params)
	}
	return f.resumeSaga(w, r, msg.ID, params)
}

// callSaga starts a saga: the tool call, made once.
func (f *Face) callSaga(w http.ResponseWriter, r *http.Request, id json.RawMessage, params gjson.Result) error {
	name := params.Get("name")
	if name.Type != gjson.String || name.Str == "" || len(name.Str) > seal.MaxSagaName {
		return jsonrpc.WriteError(w, id, invalid("name must be a tool name (a string of 1 to %d bytes)", seal.MaxSagaName))
	}
	var args json.RawMessage
	switch a := params.Get("arguments"); {
	case !a.Exists() || a.Type == gjson.Null:
	case !a.IsObject():
		return jsonrpc.WriteError(w, id, invalid("arguments must be an object"))
	case len(a.Raw) > seal.MaxSagaArguments:
		return jsonrpc.WriteError(w, id, invalid("arguments must be at most %d bytes in a saga (the sagaToken carries them)", seal.MaxSagaArguments))
	default:
		args = json.RawMessage(a.Raw)
	}
	first := f.gw.Traced(r, name.Str, seal.TraceRef{})
	return f.run(w, r, id, face.ToolCall{Name: name.Str, Args: args}, first)
}

// resumeSaga goes on with a suspended saga: the retry of its tool call,
// answering the steps of the suspension its sagaToken names.
func (f *Face) resumeSaga(w http.ResponseWriter, r *http.Request, id json.RawMessage, params gjson.Result) error {
	tok := params.Get("sagaToken")
	if tok.Type != gjson.String {
		return jsonrpc.WriteError(w, id, invalid("sagaToken must be a string"))
	}
	completed := params.Get("completedSteps")
	if !completed.IsArray() {
		return jsonrpc.WriteError(w, id, invalid("completedSteps must be an array"))
	}
	now := time.Now()
	st, err := seal.OpenSaga(f.gw.Keyring(), tok.Str, now)
	if err == nil && st.Principal != f.gw.Principal(r) {
		err = errors.New("another principal's")
	}
	if err != nil {
		return f.refuseToken(w, id, err)
	}
	responses, refused, rerr := stepResponses(st.Steps, completed)
	if rerr != nil {
		return jsonrpc.WriteError(w, id, rerr)
	}
	switch err := f.gw.UseOnce(r.Context(), usePurpose, st.ID, st.Expires); {
	case errors.Is(err, face.ErrUseUnrecorded):
		return jsonrpc.WriteError(w, id, jsonrpc.Errorf(http.StatusServiceUnavailable, jsonrpc.InternalError, "%s", useUnrecorded))
	case err != nil:
		return f.refuseToken(w, id, err)
	}
	first := f.gw.Traced(r, st.Name, st.Trace)
	if refused != nil {
		return writeResult(w, id, face.SamplingRefused(refused.id, refused.message))
	}
	return f.run(w, r, id, face.ToolCall{Name: st.Name, Args: st.Arguments, Responses: responses, State: st.RequestState}, first)
}

// refuseToken answers a sagaToken that is not valid for the caller with
// one message for every reason (tampered, forged, expired, another
// principal's, already used), as requestStates are refused: a refusal
// tells nobody whether a token is genuine, nor whose it is not. Why goes
// to the debug log.
func (f *Face) refuseToken(w http.ResponseWriter, id json.RawMessage, why error) error {
	f.gw.Logger().Debug("sagaToken refused", zap.String("why", why.Error()))
	return jsonrpc.WriteError(w, id, invalid(tokenRefused))
}

// tokenRefused is the message of every sagaToken refusal.
const tokenRefused = "sagaToken is not valid (invalid, expired, already used, or not yours): " +
	"resume with the sagaToken of the latest suspension, or start again with tools/callSaga"

// useUnrecorded is the message of a resumeSaga whose token's use could
// not be recorded (the storage failed): nothing was done.
const useUnrecorded = "Internal error: the gateway could not record the sagaToken's use (its storage is unavailable; " +
	"the gateway's log says why): nothing was done, resume again with the same sagaToken"

// newToken seals the suspension of call at the input_required answer
// whose requestState is state and whose input requests are steps; first
// names the span of the saga's first request (Gateway.Traced).
func (f *Face) newToken(r *http.Request, call face.ToolCall, state string, steps []seal.SagaStep, first seal.TraceRef) (string, error) {
	s := seal.SagaState{
		Principal: f.gw.Principal(r), Expires: time.Now().Add(f.gw.Limits().ParkTTL).Add(time.Second),
		Name: call.Name, Arguments: call.Args, RequestState: state, Steps: steps, Trace: first,
	}
	if _, err := rand.Read(s.ID[:]); err != nil {
		return "", err
	}
	return seal.SealSaga(f.gw.Keyring(), s)
}

// Interface guards
var _ face.MessageFace = (*Face)(nil)
