package rest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestRebased: a tool's local references ("#", "#/$defs/…") point into
// the document where its schema is; data (default, enum, const,
// examples), another document's references and anchors are left as they
// are, and a property named as a keyword is a name.
func TestRebased(t *testing.T) {
	in := `{"$defs":{"Item":{"type":"object","properties":{"next":{"$ref":"#"}}}},"type":"object",` +
		`"properties":{"item":{"$ref":"#/$defs/Item"},"default":{"$ref":"#/$defs/Item"},"far":{"$ref":"https://x.test/s.json#/a"},` +
		`"anchor":{"$ref":"#here"}},"default":{"$ref":"#/data"},"examples":[{"$ref":"#/data"}],"allOf":[{"$ref":"#/$defs/Item"}]}`
	const at = "#/components/schemas/t.arguments"
	want := `{"$defs":{"Item":{"type":"object","properties":{"next":{"$ref":"` + at + `"}}}},"type":"object",` +
		`"properties":{"item":{"$ref":"` + at + `/$defs/Item"},"default":{"$ref":"` + at + `/$defs/Item"},"far":{"$ref":"https://x.test/s.json#/a"},` +
		`"anchor":{"$ref":"#here"}},"default":{"$ref":"#/data"},"examples":[{"$ref":"#/data"}],"allOf":[{"$ref":"` + at + `/$defs/Item"}]}`
	got := rebased(gjson.Parse(in), at)
	if string(got) != want {
		t.Fatalf("rebased:\n got %s\nwant %s", got, want)
	}
	if !json.Valid(got) {
		t.Fatal("not JSON")
	}
}

// TestSeenIsError: a record an earlier version wrote for an isError
// result (failed, a result, no error) reads as success; a failure with
// an error stays one.
func TestSeenIsError(t *testing.T) {
	now := time.Now()
	old := seal.RESTCall{Status: statusFailed, Result: json.RawMessage(`{"content":[],"isError":true}`)}
	if got := seen(old, now); got.Status != statusSuccess {
		t.Fatalf("an isError result reads %s", got.Status)
	}
	failed := seal.RESTCall{Status: statusFailed, Error: json.RawMessage(`{"code":-32603,"message":"m"}`)}
	if got := seen(failed, now); got.Status != statusFailed {
		t.Fatalf("a failure reads %s", got.Status)
	}
}
