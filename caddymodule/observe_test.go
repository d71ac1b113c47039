package caddymodule

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"
)

func TestMethodLabel(t *testing.T) {
	for in, want := range map[string]string{
		"tools/call": "tools/call", "": "none", "response": "response", "GET": "GET",
		"x/made-up": "other", "tools/call2": "other",
	} {
		if got := methodLabel(in); got != want {
			t.Errorf("methodLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestObserveRequest: a pass-through request is counted with its cell and
// an outcome from its status, and the outcome placeholder is set.
func TestObserveRequest(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h := &Handler{logger: zap.NewNop(), metrics: newGatewayMetrics(reg)}
	if again := newGatewayMetrics(reg); again.requests != h.metrics.requests {
		t.Fatal("a second handler of the same configuration did not share the collectors")
	}
	for _, c := range []struct {
		cell, method string
		status       int
		want         string
	}{
		{cellModern, "tools/list", 200, "ok"},
		{cellPinned, "", 404, "error"},
		{"", "initialize", 503, "error"},
	} {
		repl := caddy.NewReplacer()
		if c.cell != "" {
			repl.Set("http.mcp_gateway.cell", c.cell)
		}
		repl.Set("http.mcp_gateway.method", c.method)
		r := httptest.NewRequest("POST", "/mcp", nil)
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
		h.observeRequest(r, c.status, []byte(`{}`), time.Now())
		if got, _ := repl.GetString("http.mcp_gateway.outcome"); got != c.want {
			t.Errorf("%+v: outcome %q, want %q", c, got, c.want)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("the pedantic registry refuses the gateway's collectors: %v", err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "caddy_mcp_gateway_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, fmt.Sprintf("%s %v", strings.Join(labels, ","), m.GetCounter().GetValue()))
		}
	}
	want := []string{
		"cell=legacy-legacy,method=none,outcome=error 1",
		"cell=modern-modern,method=tools/list,outcome=ok 1",
		"cell=none,method=initialize,outcome=error 1",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("requests_total = %q, want %q", got, want)
	}
}

// BenchmarkObserveRequest measures what counting and (not) logging a
// request adds to it.
func BenchmarkObserveRequest(b *testing.B) {
	h := &Handler{logger: zap.NewNop(), metrics: newGatewayMetrics(prometheus.NewRegistry())}
	repl := caddy.NewReplacer()
	repl.Set("http.mcp_gateway.cell", cellForward)
	repl.Set("http.mcp_gateway.method", "tools/call")
	repl.Set("http.mcp_gateway.outcome", "complete")
	r := httptest.NewRequest("POST", "/mcp", nil)
	r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`)
	start := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		h.observeRequest(r, 200, body, start)
	}
}
