package saga

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// testGateway is a face.Gateway with a keyring and no upstream: the
// refusals below are made before any request is. Its UseOnce answers
// useErr, else uses ids in used (nil: every use is a first).
type testGateway struct {
	kr       *seal.Keyring
	used     *seal.ReplayFilter
	useErr   error
	requests *int // the internal requests made, when not nil
}

func (g testGateway) Request(context.Context, *http.Request, face.Internal, http.ResponseWriter) (string, *face.Failure) {
	if g.requests != nil {
		*g.requests++
	}
	return "", &face.Failure{Status: http.StatusBadGateway, Detail: "no upstream in this test"}
}
func (g testGateway) UseOnce(_ context.Context, _ string, id [16]byte, expires time.Time) error {
	if g.useErr != nil {
		return g.useErr
	}
	if g.used != nil && g.used.Use(id, expires, time.Now()) != nil {
		return face.ErrUsed
	}
	return nil
}
func (g testGateway) Principal(*http.Request) [16]byte             { return [16]byte{} }
func (g testGateway) CheckRequest(*http.Request) *jsonrpc.RPCError { return nil }
func (g testGateway) ReadBody(http.ResponseWriter, *http.Request) ([]byte, *jsonrpc.RPCError) {
	return nil, nil
}
func (g testGateway) Keyring() *seal.Keyring               { return g.kr }
func (g testGateway) Instance() string                     { return "test" }
func (g testGateway) Logger() *zap.Logger                  { return zap.NewNop() }
func (g testGateway) Limits() face.Limits                  { return face.Limits{MaxRounds: 8} }
func (g testGateway) Track(context.CancelCauseFunc) func() { return func() {} }
func (g testGateway) Stopping() bool                       { return false }
func (g testGateway) Traced(_ *http.Request, _ string, first seal.TraceRef) seal.TraceRef {
	return first
}

// TestSuspensionSteps: an input_required result's requests become steps
// (roots kept for the token, not shown); what a saga cannot carry is an
// error.
func TestSuspensionSteps(t *testing.T) {
	res := gjson.Parse(`{"resultType":"input_required","inputRequests":{
		"host":{"method":"elicitation/create","params":{"message":"Who?"}},
		"toast":{"method":"sampling/createMessage","params":{"maxTokens":5}},
		"roots-1":{"method":"roots/list"}},"requestState":"s"}`)
	all, shown, err := suspensionSteps(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[2] != (seal.SagaStep{ID: "roots-1", Kind: seal.SagaRoots}) {
		t.Fatalf("all: %+v", all)
	}
	if len(shown) != 2 || shown[0].Type != "elicitation" || shown[0].StepID != "host" || string(shown[0].Params) != `{"message":"Who?"}` ||
		shown[1].Type != "sampling" || shown[1].StepID != "toast" {
		t.Fatalf("shown: %+v", shown)
	}
	for name, bad := range map[string]string{
		"unknown method": `{"inputRequests":{"x":{"method":"tools/list"}}}`,
		"long key":       `{"inputRequests":{"` + strings.Repeat("k", seal.MaxSagaStepID+1) + `":{"method":"roots/list"}}}`,
		"not an object":  `{"inputRequests":[1]}`,
	} {
		if _, _, err := suspensionSteps(gjson.Parse(bad)); err == nil || err.HTTPStatus != http.StatusBadGateway {
			t.Errorf("%s: %v", name, err)
		}
	}
	many := `{"inputRequests":{`
	for i := range seal.MaxSagaSteps + 1 {
		if i > 0 {
			many += ","
		}
		many += `"k` + strings.Repeat("x", i) + `":{"method":"roots/list"}`
	}
	if _, _, err := suspensionSteps(gjson.Parse(many + "}}")); err == nil {
		t.Error("more steps than a sagaToken holds were accepted")
	}
}

// TestStepResponses: completedSteps are read for the current suspension
// only, the last entry of a repeated id counting; errors decline an
// elicitation and refuse a sampling step; invalid entries are refused.
func TestStepResponses(t *testing.T) {
	steps := []seal.SagaStep{{ID: "b", Kind: seal.SagaElicitation}, {ID: "r", Kind: seal.SagaRoots}}
	done := gjson.Parse(`[{"stepId":"a","result":{"anything":1}},{"stepId":"b","result":{"action":"accept"}},
		{"stepId":"b","result":{"action":"accept","content":{"x":"y"}}}]`)
	out, refused, err := stepResponses(steps, done)
	if err != nil || refused != nil || len(out) != 2 || string(out["b"]) != `{"action":"accept","content":{"x":"y"}}` || string(out["r"]) != `{"roots":[]}` {
		t.Fatalf("%v %v %v", out, refused, err)
	}
	out, _, err = stepResponses(steps, gjson.Parse(`[{"stepId":"b","error":{"code":-1,"message":"no"}}]`))
	if err != nil || string(out["b"]) != `{"action":"decline"}` {
		t.Fatalf("declined: %v %v", out, err)
	}
	sampling := []seal.SagaStep{{ID: "s", Kind: seal.SagaSampling}}
	_, refused, err = stepResponses(sampling, gjson.Parse(`[{"stepId":"s","error":{"code":-1,"message":"no LLM"}}]`))
	if err != nil || refused == nil || refused.id != "s" || refused.message != "no LLM" {
		t.Fatalf("refused sampling: %v %v", refused, err)
	}
	if r := face.SamplingRefused(refused.id, refused.message); !r.IsError || !strings.Contains(r.Content[0].Text, `"s": no LLM`) {
		t.Fatalf("refusal: %+v", r)
	}
	for name, bad := range map[string]string{
		"missing":        `[{"stepId":"a","result":{}}]`,
		"both":           `[{"stepId":"s","result":{},"error":{}}]`,
		"neither":        `[{"stepId":"s"}]`,
		"error not obj":  `[{"stepId":"s","error":"no"}]`,
		"no stepId":      `[{"result":{}}]`,
		"invalid result": `[{"stepId":"s","result":{"role":"robot"}}]`,
		"entry not obj":  `[1]`,
	} {
		if _, _, err := stepResponses(sampling, gjson.Parse(bad)); err == nil || err.HTTPStatus != http.StatusBadRequest {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestServeSagaRefusals: what the face refuses before any tool call: a
// notification, params that are not an object, a bad name or arguments,
// and a resume without a valid token or completedSteps — each a JSON-RPC
// error echoing the request's id.
func TestServeSagaRefusals(t *testing.T) {
	kr, err := seal.NewKeyring(bytes.Repeat([]byte{9}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	f := &Face{gw: testGateway{kr: kr}}
	for name, c := range map[string]struct {
		body string
		code int
	}{
		"notification":      {`{"jsonrpc":"2.0","method":"tools/callSaga","params":{"name":"x"}}`, -32600},
		"params not object": {`{"jsonrpc":"2.0","id":7,"method":"tools/callSaga","params":[1]}`, -32602},
		"no name":           {`{"jsonrpc":"2.0","id":7,"method":"tools/callSaga","params":{}}`, -32602},
		"long name":         {`{"jsonrpc":"2.0","id":7,"method":"tools/callSaga","params":{"name":"` + strings.Repeat("n", 256) + `"}}`, -32602},
		"arguments array":   {`{"jsonrpc":"2.0","id":7,"method":"tools/callSaga","params":{"name":"x","arguments":[1]}}`, -32602},
		"token not string":  {`{"jsonrpc":"2.0","id":7,"method":"tools/resumeSaga","params":{"sagaToken":1,"completedSteps":[]}}`, -32602},
		"no steps":          {`{"jsonrpc":"2.0","id":7,"method":"tools/resumeSaga","params":{"sagaToken":"x"}}`, -32602},
		"forged token":      {`{"jsonrpc":"2.0","id":7,"method":"tools/resumeSaga","params":{"sagaToken":"AAAA","completedSteps":[]}}`, -32602},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(c.body))
		if err := f.serve(w, r, []byte(c.body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := gjson.Get(w.Body.String(), "error.code").Int()
		if w.Code != http.StatusBadRequest || got != int64(c.code) {
			t.Errorf("%s: HTTP %d %s, want 400 %d", name, w.Code, w.Body, c.code)
		}
		if id := gjson.Get(w.Body.String(), "id").Raw; c.code == -32602 && id != "7" {
			t.Errorf("%s: id %s", name, id)
		}
	}
}

// TestResumeSagaUse: a resume whose token's use cannot be recorded (the
// storage down) is refused with 503 and makes no call; a token used
// already (on any instance) is refused as every invalid token is, and
// makes no call either.
func TestResumeSagaUse(t *testing.T) {
	kr, err := seal.NewKeyring(bytes.Repeat([]byte{9}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	st := seal.SagaState{ID: [16]byte{1}, Expires: time.Now().Add(time.Minute), Name: "ask", RequestState: "s",
		Steps: []seal.SagaStep{{ID: "e", Kind: seal.SagaElicitation}}}
	token, err := seal.SealSaga(kr, st)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/resumeSaga","params":{"sagaToken":"` + token +
		`","completedSteps":[{"stepId":"e","result":{"action":"accept","content":{"a":"b"}}}]}}`
	used := seal.NewReplayFilter(8)
	_ = used.Use(st.ID, st.Expires, time.Now())
	for name, c := range map[string]struct {
		gw   testGateway
		want int
		code int64
		msg  string
	}{
		"storage down": {testGateway{kr: kr, useErr: fmt.Errorf("%w: locking: disk on fire", face.ErrUseUnrecorded)},
			http.StatusServiceUnavailable, jsonrpc.InternalError, "nothing was done, resume again with the same sagaToken"},
		"used": {testGateway{kr: kr, used: used}, http.StatusBadRequest, jsonrpc.InvalidParams, tokenRefused},
	} {
		requests := 0
		c.gw.requests = &requests
		f := &Face{gw: c.gw, client: face.Client{GW: c.gw}}
		w := httptest.NewRecorder()
		if err := f.serve(w, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)), []byte(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w.Code != c.want || gjson.Get(w.Body.String(), "error.code").Int() != c.code ||
			!strings.Contains(w.Body.String(), c.msg) || gjson.Get(w.Body.String(), "id").Raw != "7" || requests != 0 {
			t.Errorf("%s: HTTP %d %s after %d requests, want %d %d %q and none", name, w.Code, w.Body, requests, c.want, c.code, c.msg)
		}
	}
}
