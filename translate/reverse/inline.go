package reverse

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	"github.com/tidwall/gjson"
)

// In-line requests: a round of the reverse bridge asks the legacy client
// the upstream's questions as JSON-RPC requests on the SSE answer to the
// client's call (ask), and collects the answers the client POSTs (Answer),
// which may reach another gateway instance (AnswerOwner).

// leg is one in-line request of a round, waiting for the client's answer.
type leg struct {
	key     string
	method  string
	session [16]byte
	answers chan<- legAnswer
}

type legAnswer struct {
	key string
	msg gjson.Result // the client's JSON-RPC response
}

// noAnswer starts the failure of a round whose answers did not come in time.
const noAnswer = "the client did not answer"

// ask sends one round's input requests in-line to the client and collects
// its answers. It returns the inputResponses, or why the round failed (""
// when it did not); when ctx ends first it returns nothing.
//
// w, started by the caller, measures the time spent building the in-line
// requests; it is stopped before they are sent.
func (rv *Bridge) ask(ctx context.Context, s *Session, r Request, sink translate.Sink, reqs gjson.Result, w translate.Stopwatch) (map[string]json.RawMessage, string) {
	o := rv.options(s)
	type inline struct {
		id, key, method string
		params          []byte
	}
	var legs []inline
	fail := ""
	n := 0
	reqs.ForEach(func(_, _ gjson.Result) bool { n++; return true })
	if n > o.MaxInputsPerRound {
		return nil, fmt.Sprintf("the server asked for %d inputs in one round, more than %d (max_inputs_per_round); giving up", n, o.MaxInputsPerRound)
	}
	reqs.ForEach(func(k, v gjson.Result) bool {
		method, params := v.Get("method"), v.Get("params")
		switch {
		case !v.IsObject() || method.Type != gjson.String || !translate.IsInputMethod(method.Str):
			fail = fmt.Sprintf("the server asked for input %q of an unknown kind", jsonrpc.Clip(k.Str))
		case method.Str != translate.MethodListRoots && !params.IsObject():
			fail = fmt.Sprintf("the server's input request %q (%s) has no params", jsonrpc.Clip(k.Str), method.Str)
		case !translate.ClientSupports(s.Capabilities, method.Str, []byte(params.Raw)):
			fail = fmt.Sprintf("cannot ask for input %q (%s): this client did not declare the capability %s at initialize",
				jsonrpc.Clip(k.Str), method.Str, translate.RequiredCapability(method.Str, []byte(params.Raw)))
		}
		if fail != "" {
			return false
		}
		p := []byte(nil)
		if params.IsObject() {
			p = []byte(params.Raw)
		}
		if method.Str == translate.MethodElicit && translate.ElicitMode(p) == "url" && !gjson.GetBytes(p, "elicitationId").Exists() {
			// 2025-11-25 URL mode requires an elicitationId; 2026 has none.
			var rnd [16]byte
			_, _ = rand.Read(rnd[:])
			if at, text, ok := jsonrpc.InsertMember(string(p), "elicitationId", `"elicitationId":"`+hex.EncodeToString(rnd[:])+`"`); ok {
				p = []byte(string(p[:at]) + text + string(p[at:]))
			}
		}
		legs = append(legs, inline{id: rv.inlineID(o), key: k.Str, method: method.Str, params: p})
		return true
	})
	w.Stop()
	if fail != "" {
		return nil, fail
	}

	answers := make(chan legAnswer, len(legs))
	rv.mu.Lock()
	for _, l := range legs {
		rv.waiting[l.id] = &leg{key: l.key, method: l.method, session: s.ID, answers: answers}
	}
	rv.mu.Unlock()
	defer func() {
		rv.mu.Lock()
		for _, l := range legs {
			delete(rv.waiting, l.id)
		}
		rv.mu.Unlock()
	}()
	for _, l := range legs {
		msg := make([]byte, 0, 64+len(l.id)+len(l.method)+len(l.params))
		msg = append(msg, `{"jsonrpc":"2.0","id":`...)
		msg = append(msg, jsonrpc.Quote(l.id)...)
		msg = append(msg, `,"method":`...)
		msg = append(msg, jsonrpc.Quote(l.method)...)
		if l.params != nil {
			msg = append(msg, `,"params":`...)
			msg = append(msg, l.params...)
		}
		msg = append(msg, '}')
		if err := sink.Notify(msg); err != nil {
			return nil, "the client's stream failed: " + err.Error()
		}
	}

	timeout := time.NewTimer(o.RoundTimeout)
	defer timeout.Stop()
	responses := make(map[string]json.RawMessage, len(legs))
	for len(responses) < len(legs) {
		select {
		case a := <-answers:
			if e := a.msg.Get("error"); e.Exists() {
				return nil, fmt.Sprintf("the client refused the server's request for input %q: %s (code %d)",
					jsonrpc.Clip(a.key), jsonrpc.Clip(e.Get("message").String()), e.Get("code").Int())
			}
			responses[a.key] = json.RawMessage(a.msg.Get("result").Raw)
		case <-timeout.C:
			return nil, fmt.Sprintf(noAnswer+" the server's request for input within %v", o.RoundTimeout)
		case <-ctx.Done():
			return nil, ""
		}
	}
	return responses, ""
}

// Answer takes a client's JSON-RPC response (its answer to an in-line
// request) for session s. nil means accepted (202).
func (rv *Bridge) Answer(s *Session, body []byte) *jsonrpc.RPCError {
	id := gjson.GetBytes(body, "id")
	if id.Type != gjson.String {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest, "Invalid Request: no pending request of this session has id %s", jsonrpc.Clip(id.Raw))
	}
	inst, _, ok := inlineOwner(id.Str)
	if ok && inst != rv.options(s).Instance {
		return jsonrpc.Errorf(http.StatusMisdirectedRequest, jsonrpc.InvalidRequest,
			"Invalid Request: request %s was sent by gateway instance %s; its answer must reach that instance",
			jsonrpc.Clip(strconv.Quote(id.Str)), jsonrpc.Clip(inst))
	}
	rv.mu.Lock()
	l := rv.waiting[id.Str]
	if l != nil && l.session == s.ID {
		delete(rv.waiting, id.Str)
	} else {
		l = nil
	}
	rv.mu.Unlock()
	if l == nil {
		return jsonrpc.Errorf(http.StatusBadRequest, jsonrpc.InvalidRequest,
			"Invalid Request: no pending request of this session has id %s (unknown, already answered, cancelled or timed out)", jsonrpc.Clip(strconv.Quote(id.Str)))
	}
	l.answers <- legAnswer{key: l.key, msg: gjson.ParseBytes(body)} // buffered for every leg
	return nil
}

// inlineID mints the id of an in-line request: "gw:<instance>:<n>", and
// when the instance advertises an address, "gw:<instance>:<n>:<owner tag>".
func (rv *Bridge) inlineID(o *Options) string {
	id := "gw:" + o.Instance + ":" + strconv.FormatUint(rv.nextID.Add(1), 10)
	if o.ownerTag != "" {
		id += ":" + o.ownerTag
	}
	return id
}

// inlineOwner returns the instance an in-line request id names, and its
// owner tag ("" when none).
func inlineOwner(id string) (inst, tag string, ok bool) {
	rest, ok := strings.CutPrefix(id, "gw:")
	if !ok {
		return "", "", false
	}
	inst, rest, ok = strings.Cut(rest, ":")
	if !ok || inst == "" {
		return "", "", false
	}
	n, tag, hasTag := strings.Cut(rest, ":")
	if _, err := strconv.ParseUint(n, 10, 64); err != nil || hasTag && tag == "" {
		return "", "", false
	}
	return inst, tag, true
}

// AnswerOwner reports whether body, a legacy client's JSON-RPC response
// to session s, answers an in-line request another instance than s's
// options name sent, and which. The owner's address is set only from a tag
// sealed with s's keyring that opens and names the same instance.
func (rv *Bridge) AnswerOwner(s *Session, body []byte) (translate.Owner, bool) {
	id := gjson.GetBytes(body, "id")
	if id.Type != gjson.String {
		return translate.Owner{}, false
	}
	o := rv.options(s)
	inst, tag, ok := inlineOwner(id.Str)
	if !ok || inst == o.Instance {
		return translate.Owner{}, false
	}
	owner := translate.Owner{Instance: inst}
	if sealedInst, addr, ok := seal.OpenOwner(o.Keyring, tag); ok && sealedInst == inst {
		owner.Address = addr
	}
	return owner, true
}
