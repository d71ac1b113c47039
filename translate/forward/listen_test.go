package forward

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// TestTagSubscription: the subscription id goes into the notification's
// _meta by splicing: the upstream's params keep their order and values, and
// of a repeated _meta the first counts.
func TestTagSubscription(t *testing.T) {
	id := json.RawMessage(`"s1"`)
	for raw, want := range map[string]string{
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://1","_meta":{"x":1}}}`: `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://1","_meta":{"x":1,"io.modelcontextprotocol/subscriptionId":"s1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`:                                         `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s1"}}}`,
		`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"a":1},"_meta":{"b":2}}}`:                             `{"jsonrpc":"2.0","method":"m","params":{"_meta":{"a":1,"io.modelcontextprotocol/subscriptionId":"s1"}}}`,
		`{"jsonrpc":"2.0","method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"forged"}}}`: `{"jsonrpc":"2.0","method":"m","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s1"}}}`,
	} {
		if got := string(tagSubscription(jsonrpc.ParseMessage([]byte(raw)), id)); got != want {
			t.Errorf("tagSubscription(%s) =\n%s, want\n%s", raw, got, want)
		}
	}
}

// TestAskedFilter: members of the wrong type count as absent.
func TestAskedFilter(t *testing.T) {
	f := askedFilter(gjson.Parse(`{"toolsListChanged":true,"promptsListChanged":"true","resourceSubscriptions":["a://1",7,"b://2"]}`))
	if !f.ToolsListChanged || f.PromptsListChanged || f.ResourcesListChanged || len(f.ResourceSubscriptions) != 2 || f.ResourceSubscriptions[1] != "b://2" {
		t.Errorf("askedFilter = %+v", f)
	}
}
