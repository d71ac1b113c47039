package main

import (
	"flag"
	"fmt"
	"net/http"
	"sync/atomic"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/tests/support"
)

// otlp runs an OTLP/HTTP traces receiver (protobuf, plain or gzip) that
// decodes every export and counts its spans, for the tracing benchmark's
// exporter (tests/bench/traces.sh): POST /v1/traces takes an export, GET
// /count answers the number of spans received so far.
func otlp(args []string) error {
	fs := flag.NewFlagSet("otlp", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:4318", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var spans atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		req, err := support.ReadExport(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				spans.Add(int64(len(ss.GetSpans())))
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	})
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, spans.Load()) })
	return http.ListenAndServe(*addr, mux)
}
