package legacy

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

func answer(contentType, body string) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {contentType}}, Body: io.NopCloser(strings.NewReader(body))}
}

func TestMessageReaderJSON(t *testing.T) {
	rd := NewMessageReader(answer("application/json", ` {"jsonrpc":"2.0","id":1,"result":{}} `), 1<<10)
	m, err := rd.Next()
	if err != nil || m.Kind != jsonrpc.KindResponse || string(m.ID) != "1" || rd.IsStream() {
		t.Fatalf("got %+v, %v", m, err)
	}
	if _, err := rd.Next(); err != io.EOF {
		t.Fatalf("second Next: %v, want EOF", err)
	}
	for _, body := range []string{"", "<html>", "[1]", `{"a":`, strings.Repeat(" ", 2<<10) + "{}"} {
		if _, err := NewMessageReader(answer("application/json", body), 1<<10).Next(); err == nil || err == io.EOF {
			t.Errorf("body %.20q: %v, want an error", body, err)
		}
	}
}

func TestMessageReaderStream(t *testing.T) {
	stream := "id: 0\ndata:\n\n" + // priming
		"retry: 250\nid: a\ndata: not json\n\n" +
		"id: b\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n" +
		": keep-alive\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"elicitation/create\"}\n\n" +
		"id: c\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
	rd := NewMessageReader(answer("text/event-stream", stream), 1<<10)
	var kinds []jsonrpc.Kind
	for {
		m, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, m.Kind)
	}
	if want := []jsonrpc.Kind{jsonrpc.KindNotification, jsonrpc.KindRequest, jsonrpc.KindResponse}; len(kinds) != 3 || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	if rd.LastEventID() != "c" {
		t.Errorf("last event id %q, want c", rd.LastEventID())
	}
	if ms, ok := rd.Retry(); !ok || ms != 250 {
		t.Errorf("retry %d %v, want 250", ms, ok)
	}
	broken := NewMessageReader(answer("text/event-stream", "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"), 1<<10)
	if _, err := broken.Next(); err == nil || err == io.EOF {
		t.Errorf("an event cut short: %v, want an error", err)
	}
}

// FuzzMessageReader: any answer, JSON or SSE, ends (EOF or an error)
// without a panic, and a stream yields only JSON-RPC messages.
func FuzzMessageReader(f *testing.F) {
	f.Add(true, "id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
	f.Add(true, "data:\r\ndata: {}\r\n\r\nretry: 9\n\n")
	f.Add(false, `{"jsonrpc":"2.0","method":"m"}`)
	f.Add(false, "[]")
	f.Fuzz(func(t *testing.T, stream bool, body string) {
		ct := "application/json"
		if stream {
			ct = "text/event-stream"
		}
		rd := NewMessageReader(answer(ct, body), 1<<12)
		for i := 0; ; i++ {
			m, err := rd.Next()
			if err != nil {
				return
			}
			if stream && m.Kind == jsonrpc.KindInvalid {
				t.Fatalf("invalid message from a stream: %q", m.Raw)
			}
			if i > len(body) {
				t.Fatalf("more messages than bytes")
			}
		}
	})
}

// TestMessageReaderTooDeep: an answer or an event nested beyond
// MaxJSONDepth ends the answer with ErrJSONTooDeep (instead of being
// skipped, or costing the gateway its stack), whatever its size within the
// limit; one nested just within the limit is a message like any other.
func TestMessageReaderTooDeep(t *testing.T) {
	const size = 15 << 20
	bomb := `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", size)
	within := `{"jsonrpc":"2.0","id":1,"result":{"a":` + strings.Repeat("[", jsonrpc.MaxJSONDepth-2) + strings.Repeat("]", jsonrpc.MaxJSONDepth-2) + `}}`
	for _, c := range []struct {
		ct, body string
		deep     bool
	}{
		{"application/json", bomb, true},
		{"text/event-stream", "id: 1\ndata: " + bomb + "\n\nid: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n", true},
		{"application/json", within, false},
		{"text/event-stream", "data: " + within + "\n\n", false},
	} {
		m, err := NewMessageReader(answer(c.ct, c.body), 16<<20).Next()
		switch {
		case c.deep && !errors.Is(err, jsonrpc.ErrJSONTooDeep):
			t.Errorf("%s bomb: %v, want jsonrpc.ErrJSONTooDeep", c.ct, err)
		case c.deep && !strings.Contains(err.Error(), "128 levels"):
			t.Errorf("%s bomb: %q does not name the limit", c.ct, err)
		case !c.deep && (err != nil || m.Kind != jsonrpc.KindResponse):
			t.Errorf("%s within the limit: %+v, %v", c.ct, m.Kind, err)
		}
	}
}
