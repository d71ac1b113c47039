package sse

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// benchStream is a typical MCP stream: a priming event, then JSON-RPC
// messages with ids, and a keep-alive now and then.
func benchStream(events int) []byte {
	var b bytes.Buffer
	b.WriteString("id: 0\ndata:\n\n")
	for i := 1; i <= events; i++ {
		fmt.Fprintf(&b, "id: stream-1/%d\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"tok\",\"progress\":%d,\"total\":1000,\"message\":\"%s\"}}\n\n",
			i, i, strings.Repeat("working ", 10))
		if i%50 == 0 {
			b.WriteString(": keep-alive\n\n")
		}
	}
	return b.Bytes()
}

func BenchmarkReader(b *testing.B) {
	const events = 1000
	stream := benchStream(events)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	src := bytes.NewReader(stream)
	for b.Loop() {
		src.Reset(stream)
		r := NewReader(src, 0)
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			n++
		}
		if n != events+1 {
			b.Fatalf("read %d events", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(events+1)), "ns/event")
}

func BenchmarkWriter(b *testing.B) {
	ev := Event{ID: "stream-1/42", HasID: true, Type: "message", HasData: true,
		Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok","progress":42,"total":1000}}`)}
	w := NewWriter(&discardWriter{header: http.Header{}})
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
}
