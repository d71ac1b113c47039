package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/tidwall/gjson"
)

// listCaller asks a stateless 2026-07-28 tools/list (first page, with _meta
// and the mirrored headers): what a modern client does before it calls,
// and what a federated block answers by asking every server and merging.
type listCaller struct {
	c   *client
	hdr map[string]string
	id  int
}

func newList(c *client) *listCaller {
	return &listCaller{c: c, hdr: map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}}
}

func (l *listCaller) call(ctx context.Context) error {
	l.id++
	id := strconv.Itoa(l.id)
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	var callErr error
	_, err := l.c.post(ctx, l.hdr, []byte(body), func(msg []byte) (bool, error) {
		m := gjson.ParseBytes(msg)
		if m.Get("id").Raw != id {
			return false, nil // a notification
		}
		if e := m.Get("error"); e.Exists() {
			callErr = fmt.Errorf("JSON-RPC error %s", e.Raw)
		} else if len(m.Get("result.tools").Array()) == 0 {
			callErr = fmt.Errorf("no tools listed: %.200s", m.Raw)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	return callErr
}
