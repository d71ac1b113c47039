package caddymodule

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// This file is the saga face (option `saga on`): tools/callSaga and
// tools/resumeSaga, a stateless tool-call saga, served as a translation
// onto the gateway's own modern path. A callSaga becomes a modern
// tools/call the gateway makes through its own dispatch (saga_call.go), so
// routing, the principal, relays between instances, the forward bridge in
// front of legacy servers and pass-through to modern ones all apply
// unchanged; an input_required answer becomes a suspension whose
// sagaToken (seal.SagaState) holds what the retry needs, and a
// resumeSaga becomes that retry, with the completed steps as its
// inputResponses.

// The saga's methods.
const (
	methodCallSaga   = "tools/callSaga"
	methodResumeSaga = "tools/resumeSaga"
)

// sagaUsedSize bounds the sagaTokens an instance remembers as used (see
// seal.ReplayFilter: beyond it, only tokens older than the window are
// refused, during a flood).
const sagaUsedSize = 1 << 16

// sagaUsed makes a sagaToken single use on this instance. It is
// process-wide, so that a config reload does not forget what was used.
var sagaUsed = seal.NewReplayFilter(sagaUsedSize)

// isSagaMethod reports whether method is one of the saga's.
func isSagaMethod(method string) bool {
	return method == methodCallSaga || method == methodResumeSaga
}

// sagaInvalid is a -32602 answer of the saga face.
func sagaInvalid(format string, args ...any) *jsonrpc.RPCError {
	return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidParams, "Invalid params: "+format, args...)
}

// serveSaga answers a tools/callSaga or tools/resumeSaga POST.
func (h *Handler) serveSaga(w http.ResponseWriter, r *http.Request, body []byte) error {
	msg, err := jsonrpc.Peek(body)
	if err != nil {
		var re *jsonrpc.RPCError
		if !errors.As(err, &re) {
			re = jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: %v", err)
		}
		return writeRPCError(w, msg.ID, re)
	}
	if msg.Kind != jsonrpc.KindRequest {
		return writeRPCError(w, msg.ID, jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest,
			"Invalid Request: %s must be a request with an id", msg.Method))
	}
	rt := routeOf(r)
	rt.era = eraModern
	params := gjson.GetBytes(body, "params")
	if !params.IsObject() {
		return writeRPCError(w, msg.ID, sagaInvalid("params must be an object"))
	}
	if msg.Method == methodCallSaga {
		return h.callSaga(w, r, msg.ID, params)
	}
	return h.resumeSaga(w, r, msg.ID, params)
}

// callSaga starts a saga: the tool call, made once.
func (h *Handler) callSaga(w http.ResponseWriter, r *http.Request, id json.RawMessage, params gjson.Result) error {
	name := params.Get("name")
	if name.Type != gjson.String || name.Str == "" || len(name.Str) > seal.MaxSagaName {
		return writeRPCError(w, id, sagaInvalid("name must be a tool name (a string of 1 to %d bytes)", seal.MaxSagaName))
	}
	var args []byte
	switch a := params.Get("arguments"); {
	case !a.Exists() || a.Type == gjson.Null:
	case !a.IsObject():
		return writeRPCError(w, id, sagaInvalid("arguments must be an object"))
	case len(a.Raw) > seal.MaxSagaArguments:
		return writeRPCError(w, id, sagaInvalid("arguments must be at most %d bytes in a saga (the sagaToken carries them)", seal.MaxSagaArguments))
	default:
		args = []byte(a.Raw)
	}
	return h.runSaga(w, r, id, sagaCall{name: name.Str, args: args})
}

// resumeSaga goes on with a suspended saga: the retry of its tool call,
// answering the steps of the suspension its sagaToken names.
func (h *Handler) resumeSaga(w http.ResponseWriter, r *http.Request, id json.RawMessage, params gjson.Result) error {
	tok := params.Get("sagaToken")
	if tok.Type != gjson.String {
		return writeRPCError(w, id, sagaInvalid("sagaToken must be a string"))
	}
	completed := params.Get("completedSteps")
	if !completed.IsArray() {
		return writeRPCError(w, id, sagaInvalid("completedSteps must be an array"))
	}
	now := time.Now()
	st, err := seal.OpenSaga(h.keyring, tok.Str, now)
	if err == nil && st.Principal != h.principal(r) {
		err = errors.New("another principal's")
	}
	if err != nil {
		return h.refuseSagaToken(w, id, err)
	}
	responses, refused, rerr := stepResponses(st.Steps, completed)
	if rerr != nil {
		return writeRPCError(w, id, rerr)
	}
	if err := sagaUsed.Use(st.ID, st.Expires, now); err != nil {
		return h.refuseSagaToken(w, id, fmt.Errorf("already used: %w", err))
	}
	if refused != nil {
		return writeSagaResult(w, id, samplingRefused(refused))
	}
	return h.runSaga(w, r, id, sagaCall{name: st.Name, args: st.Arguments, responses: responses, state: st.RequestState})
}

// refuseSagaToken answers a sagaToken that is not valid for the caller
// with one message for every reason (tampered, forged, expired, another
// principal's, already used), as requestStates are refused: a refusal
// tells nobody whether a token is genuine, nor whose it is not. Why goes
// to the debug log.
func (h *Handler) refuseSagaToken(w http.ResponseWriter, id json.RawMessage, why error) error {
	h.logger.Debug("sagaToken refused", zap.String("why", why.Error()))
	return writeRPCError(w, id, sagaInvalid(sagaTokenRefused))
}

// sagaTokenRefused is the message of every sagaToken refusal.
const sagaTokenRefused = "sagaToken is not valid (invalid, expired, already used, or not yours): " +
	"resume with the sagaToken of the latest suspension, or start again with tools/callSaga"

// newSagaToken seals the suspension of call at the input_required answer
// whose requestState is state and whose input requests are steps.
func (h *Handler) newSagaToken(r *http.Request, call sagaCall, state string, steps []seal.SagaStep) (string, error) {
	s := seal.SagaState{
		Principal: h.principal(r), Expires: time.Now().Add(time.Duration(h.Parking.ParkTTL)).Add(time.Second),
		Name: call.name, Arguments: call.args, RequestState: state, Steps: steps,
	}
	if _, err := rand.Read(s.ID[:]); err != nil {
		return "", err
	}
	return seal.SealSaga(h.keyring, s)
}

// stepKind is the saga step kind of an input method (0 for none).
func stepKind(method string) byte {
	switch method {
	case translate.MethodElicit:
		return seal.SagaElicitation
	case translate.MethodSample:
		return seal.SagaSampling
	case translate.MethodListRoots:
		return seal.SagaRoots
	}
	return 0
}

// stepMethod is the input method of a step kind.
func stepMethod(kind byte) string {
	switch kind {
	case seal.SagaElicitation:
		return translate.MethodElicit
	case seal.SagaSampling:
		return translate.MethodSample
	}
	return translate.MethodListRoots
}
