package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// A caller makes one whole tool call, answering every question the server
// asks, in its era's way.
type caller interface {
	call(ctx context.Context) error
}

// answer is what the benchmark's user answers to every elicitation.
const answer = `{"action":"accept","content":{"answer":"yes"}}`

// legacyCaller holds one 2025-11-25 session and answers in-line requests by
// POSTing their responses, as a legacy client does.
type legacyCaller struct {
	c    *client
	tool string
	args string
	hdr  map[string]string // the session's headers, on calls and answers alike
	id   int
}

func openLegacy(ctx context.Context, c *client, tool, args string) (*legacyCaller, error) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{"elicitation":{}},"clientInfo":{"name":"mcp-bench","version":"1"}}}`
	var ok bool
	h, err := c.post(ctx, nil, []byte(init), func(msg []byte) (bool, error) {
		ok = gjson.GetBytes(msg, "result.protocolVersion").Exists()
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	sid := h.Get("Mcp-Session-Id")
	if !ok || sid == "" {
		return nil, fmt.Errorf("initialize: no session (result %v, session id %q)", ok, sid)
	}
	hdr := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
	if _, err := c.post(ctx, hdr, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil); err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return &legacyCaller{c: c, tool: tool, args: args, hdr: hdr}, nil
}

func (l *legacyCaller) call(ctx context.Context) error {
	l.id++
	id := strconv.Itoa(l.id)
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":` + strconv.Quote(l.tool) + `,"arguments":` + l.args + `}}`
	var callErr error
	_, err := l.c.post(ctx, l.hdr, []byte(body), func(msg []byte) (bool, error) {
		m := gjson.ParseBytes(msg)
		method, rid := m.Get("method"), m.Get("id")
		switch {
		case method.Exists() && rid.Exists(): // a request from the server, in-line
			res := `{}`
			if method.String() == "elicitation/create" {
				res = answer
			}
			reply := `{"jsonrpc":"2.0","id":` + rid.Raw + `,"result":` + res + `}`
			if _, err := l.c.post(ctx, l.hdr, []byte(reply), nil); err != nil {
				return true, fmt.Errorf("answering %s: %w", method.String(), err)
			}
			return false, nil
		case method.Exists(): // a notification
			return false, nil
		case rid.Raw != id:
			return false, nil
		}
		callErr = outcome(m)
		return true, nil
	})
	if err != nil {
		return err
	}
	return callErr
}

// modernCaller makes stateless 2026-07-28 calls and answers input_required
// by retrying with inputResponses and the echoed requestState. With several
// clients (instances of a fleet), the k-th request of each call (k = 0 the
// first, 1 the first retry, …) goes to cs[k % len(cs)]: with two, every
// retry of a one-round call lands on the other instance.
type modernCaller struct {
	cs   []*client
	tool string
	args string
	hdr  map[string]string
	id   int
}

const maxRounds = 10

func newModern(cs []*client, tool, args string) *modernCaller {
	return &modernCaller{cs: cs, tool: tool, args: args, hdr: map[string]string{
		"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool,
	}}
}

func (m *modernCaller) call(ctx context.Context) error {
	extra := ""
	for k := range maxRounds {
		m.id++
		id := strconv.Itoa(m.id)
		c := m.cs[k%len(m.cs)]
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":` + strconv.Quote(m.tool) + `,"arguments":` + m.args + extra +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}`
		var final gjson.Result
		if _, err := c.post(ctx, m.hdr, []byte(body), func(msg []byte) (bool, error) {
			r := gjson.ParseBytes(msg)
			if r.Get("id").Raw != id {
				return false, nil // a notification
			}
			final = r
			return true, nil
		}); err != nil {
			return err
		}
		if final.Get("result.resultType").String() != "input_required" {
			return outcome(final)
		}
		extra = retryParams(final.Get("result"))
	}
	return fmt.Errorf("more than %d rounds", maxRounds)
}

// retryParams answers every input request of an input_required result.
func retryParams(res gjson.Result) string {
	responses := "{"
	res.Get("inputRequests").ForEach(func(key, req gjson.Result) bool {
		a := `{}`
		if req.Get("method").String() == "elicitation/create" {
			a = answer
		}
		if len(responses) > 1 {
			responses += ","
		}
		responses += key.Raw + ":" + a
		return true
	})
	out := `,"inputResponses":` + responses + "}"
	if st := res.Get("requestState"); st.Exists() {
		out += `,"requestState":` + st.Raw
	}
	return out
}

// outcome is nil for a successful tool result.
func outcome(m gjson.Result) error {
	if e := m.Get("error"); e.Exists() {
		return fmt.Errorf("JSON-RPC error %s", e.Raw)
	}
	if m.Get("result.isError").Bool() {
		return fmt.Errorf("tool error %s", m.Get("result.content").Raw)
	}
	if !m.Get("result.content").Exists() {
		return fmt.Errorf("not a tool result: %.200s", m.Raw)
	}
	return nil
}
