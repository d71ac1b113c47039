package tests

// The REST face in front of modern servers (the TypeScript SDK 2.x
// fixture's MRTR rounds; the go-sdk everything-server's lists, resources,
// prompts and completions, modern and legacy), and its OpenAPI document
// checked by kin-openapi and used by a generic client.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// TestRESTModern: plan_party's three rounds (elicitation, sampling,
// elicitation) in front of a modern-only server, each answered on the
// other instance; a sampling answer of the wrong shape is refused (400)
// and leaves the call as it was.
func TestRESTModern(t *testing.T) {
	t.Parallel()
	gw := restFleet(t, "\t\tupstream "+startModernFixture(t)+" {\n\t\t\tera modern\n\t\t}", "")
	call := func(i int) string { return gw[i] + "/api/tools/plan_party/calls/p1" }
	c := wantCall(t, restDo(t, "PUT", call(0), map[string]string{"Idempotency-Key": "k"}, `{"arguments":{"occasion":"picnic"}}`),
		http.StatusCreated, "awaitingElicitationResult")
	if c.InputKey != "host" {
		t.Fatalf("first question: %+v", c)
	}
	c = wantCall(t, restDo(t, "POST", call(1)+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`},
		`{"action":"accept","content":{"name":"Ada"}}`), http.StatusOK, "awaitingSamplingResult")
	if c.InputKey != "toast" || !strings.Contains(string(c.SamplingRequest), "Ada's picnic") {
		t.Fatalf("second question: %+v", c)
	}
	wantProblem(t, restDo(t, "POST", call(0)+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`}, `{"action":"accept"}`), http.StatusBadRequest)
	c = wantCall(t, restDo(t, "POST", call(0)+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`},
		`{"role":"assistant","content":{"type":"text","text":"To Ada!"},"model":"test-llm"}`), http.StatusOK, "awaitingElicitationResult")
	c = wantCall(t, restDo(t, "POST", call(1)+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`},
		`{"action":"accept","content":{"send":true}}`), http.StatusOK, "success")
	if !strings.Contains(string(c.Result), `hosted by Ada; toast: \"To Ada!\"; invitations sent: true`) {
		t.Fatalf("final: %s", c.Result)
	}
}

// TestRESTLists: the lists (whole, strong ETag, 304), a resource's bytes
// (a blob decoded, with its content type), a prompt and a completion, in
// front of the go-sdk everything-server, modern (stateless) and legacy.
func TestRESTLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, era string }{{"modern", "modern"}, {"legacy", "legacy"}} {
		t.Run(tc.name, func(t *testing.T) {
			up := startGoEverything(t, tc.era == "modern")
			gw := restFleet(t, "\t\tupstream "+up+" {\n\t\t\tera "+tc.era+"\n\t\t}", "")
			for _, l := range []struct{ path, member, has string }{
				{"/api/tools", "tools", "test_simple_text"},
				{"/api/prompts", "prompts", "test_prompt_with_arguments"},
				{"/api/resources", "resources", "static-binary"},
				{"/api/resources-templates", "resourceTemplates", "test://template/{id}/data"},
			} {
				r := restDo(t, "GET", gw[0]+l.path, nil, "")
				var body map[string]json.RawMessage
				if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil || body[l.member] == nil ||
					!strings.Contains(string(r.Body), l.has) || body["nextCursor"] != nil {
					t.Fatalf("%s: %s", l.path, r)
				}
				// Both servers (and the gateway for a legacy one) give
				// ttlMs 0 and cacheScope public.
				if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=0" {
					t.Fatalf("%s: Cache-Control %q", l.path, cc)
				}
				etag := r.Header.Get("ETag")
				if !strings.HasPrefix(etag, `"`) || len(etag) < 10 {
					t.Fatalf("%s: ETag %q", l.path, etag)
				}
				if r2 := restDo(t, "GET", gw[1]+l.path, map[string]string{"If-None-Match": etag}, ""); r2.Status != http.StatusNotModified {
					t.Fatalf("%s with If-None-Match on the other instance: %s", l.path, r2)
				}
				if r2 := restDo(t, "GET", gw[1]+l.path, map[string]string{"If-None-Match": `"other"`}, ""); r2.Status != http.StatusOK {
					t.Fatalf("%s with another If-None-Match: %s", l.path, r2)
				}
			}
			r := restDo(t, "GET", gw[0]+"/api/resources/static-binary", nil, "")
			if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "image/png" || !bytes.HasPrefix(r.Body, []byte("\x89PNG")) {
				t.Fatalf("binary resource: HTTP %d %s %q", r.Status, r.Header.Get("Content-Type"), r.Body[:min(len(r.Body), 16)])
			}
			r = restDo(t, "GET", gw[1]+"/api/resources/static-text", nil, "")
			if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") || len(r.Body) == 0 {
				t.Fatalf("text resource: %s", r)
			}
			wantProblem(t, restDo(t, "GET", gw[0]+"/api/resources/no-such", nil, ""), http.StatusNotFound)
			r = restDo(t, "POST", gw[0]+"/api/prompts/test_prompt_with_arguments", nil, `{"arguments":{"arg1":"x1","arg2":"y2"}}`)
			if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"messages"`) || !strings.Contains(string(r.Body), "x1") {
				t.Fatalf("prompt: %s", r)
			}
			r = restDo(t, "POST", gw[1]+"/api/complete", nil,
				`{"ref":{"type":"ref/prompt","name":"test_prompt_with_arguments"},"argument":{"name":"arg1","value":"x"}}`)
			if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"completion"`) {
				t.Fatalf("complete: %s", r)
			}
			wantProblem(t, restDo(t, "POST", gw[1]+"/api/complete", nil, `{"ref":1}`), http.StatusBadRequest)
			c := wantCall(t, restDo(t, "PUT", gw[1]+"/api/tools/test_simple_text/calls/t1", map[string]string{"Idempotency-Key": "k"}, `{}`),
				http.StatusCreated, "success")
			if !strings.Contains(string(c.Result), `"content"`) {
				t.Fatalf("fast call: %s", c.Result)
			}
			if tc.era != "modern" {
				return
			}
			// One round of three questions (MRTR): roots answered by the
			// gateway, the two others asked one at a time in key order,
			// the round retried once the last is answered.
			if r := restDo(t, "PUT", gw[0]+"/api/roots", nil, `{"roots":[{"uri":"file:///srv","name":"srv"}]}`); r.Status != http.StatusNoContent {
				t.Fatalf("roots: %s", r)
			}
			m := "/api/tools/test_input_required_result_multiple_inputs/calls/m1"
			c = wantCall(t, restDo(t, "PUT", gw[0]+m, map[string]string{"Idempotency-Key": "k"}, `{}`), http.StatusCreated, "awaitingSamplingResult")
			if c.InputKey != "greeting" || !strings.Contains(string(c.SamplingRequest), "Generate a greeting") {
				t.Fatalf("first question: %+v", c)
			}
			c = wantCall(t, restDo(t, "POST", gw[1]+m+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`},
				`{"role":"assistant","content":{"type":"text","text":"Hello"},"model":"m"}`), http.StatusOK, "awaitingElicitationResult")
			if c.InputKey != "user_name" {
				t.Fatalf("second question: %+v", c)
			}
			c = wantCall(t, restDo(t, "POST", gw[0]+m+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`},
				`{"action":"accept","content":{"name":"Ada"}}`), http.StatusOK, "success")
			if !strings.Contains(string(c.Result), "Hello Ada — 1 root(s) visible") {
				t.Fatalf("final: %s", c.Result)
			}
		})
	}
}

// TestRESTOpenAPI: the document generated from tools/list is a valid
// OpenAPI 3.1 document for kin-openapi, and a generic client driven by it
// (operations found by operationId, requests and responses validated
// against it) runs an interactive call to its end.
func TestRESTOpenAPI(t *testing.T) {
	t.Parallel()
	var slept atomic.Int32
	up := restLegacyServer(t, &slept)
	gw := restFleet(t, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "")
	r := restDo(t, "GET", gw[0]+"/api/openapi.json", nil, "")
	if r.Status != http.StatusOK {
		t.Fatalf("openapi.json: %s", r)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(r.Body)
	if err != nil {
		t.Fatalf("loading the document: %v", err)
	}
	ctx := context.Background()
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("the document is not valid: %v\n%s", err, r.Body)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	// The generic client: a base URL, the document's routes.
	doc.Servers = openapi3.Servers{{URL: gw[1] + "/api"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	opPath := func(id string) (string, string) {
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				if op.OperationID == id {
					return method, path
				}
			}
		}
		t.Fatalf("no operation %s", id)
		return "", ""
	}
	do := func(opID, callID string, hdr map[string]string, body string) restCall {
		t.Helper()
		method, path := opPath(opID)
		url := gw[1] + "/api" + strings.ReplaceAll(path, "{toolCallID}", callID)
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s: %v", opID, err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route}
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			t.Fatalf("%s: the request does not fit the document: %v", opID, err)
		}
		req.Body = http.NoBody
		if body != "" {
			req.Body = nopCloser{strings.NewReader(body)}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header}
		out.SetBodyBytes(buf.Bytes())
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Fatalf("%s: the response does not fit the document: %v\n%s", opID, err, buf.Bytes())
		}
		var c restCall
		if resp.StatusCode == http.StatusNoContent {
			return c
		}
		if err := json.Unmarshal(buf.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, id := range []string{"listTools", "listPrompts", "listResources", "listResourceTemplates", "readResource", "getPrompt", "complete", "putRoots",
		"call_hello", "get_hello_call", "advance_hello_call", "cancel_hello_call", "list_hello_calls", "delete_hello_call"} {
		opPath(id)
	}
	c := do("call_ask", "o1", map[string]string{"Idempotency-Key": "k"}, `{"arguments":{"topic":"tea"}}`)
	for range 2 {
		if c.Status != "awaitingElicitationResult" {
			t.Fatalf("want a question, got %+v", c)
		}
		c = do("advance_ask_call", "o1", map[string]string{"If-Match": `"` + c.ETag + `"`}, `{"action":"accept","content":{"answer":"ok"}}`)
	}
	if c.Status != "success" || !strings.Contains(string(c.Result), "accept:ok,accept:ok") {
		t.Fatalf("final: %+v", c)
	}
	if c = do("get_ask_call", "o1", nil, ""); c.Status != "success" {
		t.Fatalf("get: %+v", c)
	}
	do("delete_ask_call", "o1", nil, "")
	wantProblem(t, restDo(t, "GET", gw[1]+"/api/tools/ask/calls/o1", nil, ""), http.StatusNotFound)
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }
