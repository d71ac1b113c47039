package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
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

// TestTaskStored: the task records' events are counted by event in
// task_store_events_total (an unknown one as "other") and logged: warn
// with the error for store_failed, info for taken_over and lost, with the
// upstream and tool.
func TestTaskStored(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	core, logs := observer.New(zapcore.DebugLevel)
	o := callObserver{metrics: newGatewayMetrics(reg), logger: zap.New(core)}
	var obs forward.TaskStoreObserver = o
	obs.TaskStored(forward.StoreFailed, "http://u/mcp", "report", errors.New("writing the task's record: disk full"))
	obs.TaskStored(forward.StoreFailed, "http://u/mcp", "report", errors.New("deleting the task's record: gone away"))
	obs.TaskStored(forward.StoreTakenOver, "http://u/mcp", "report", nil)
	obs.TaskStored(forward.StoreLost, "http://v/mcp", "search", nil)
	obs.TaskStored("made_up", "http://v/mcp", "search", nil)

	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("the pedantic registry refuses the gateway's collectors: %v", err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "caddy_mcp_gateway_task_store_events_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				got = append(got, fmt.Sprintf("%s=%s %v", l.GetName(), l.GetValue(), m.GetCounter().GetValue()))
			}
		}
	}
	want := []string{"event=lost 1", "event=other 1", "event=store_failed 2", "event=taken_over 1"}
	if !slices.Equal(got, want) {
		t.Fatalf("task_store_events_total = %q, want %q", got, want)
	}

	entries := logs.AllUntimed()
	if len(entries) != 5 {
		t.Fatalf("%d log lines, want 5: %v", len(entries), entries)
	}
	for i, c := range []struct {
		level                 zapcore.Level
		event, upstream, tool string
		err                   string
	}{
		{zapcore.WarnLevel, "store_failed", "http://u/mcp", "report", "writing the task's record: disk full"},
		{zapcore.WarnLevel, "store_failed", "http://u/mcp", "report", "deleting the task's record: gone away"},
		{zapcore.InfoLevel, "taken_over", "http://u/mcp", "report", ""},
		{zapcore.InfoLevel, "lost", "http://v/mcp", "search", ""},
		{zapcore.InfoLevel, "made_up", "http://v/mcp", "search", ""},
	} {
		e := entries[i]
		fields := e.ContextMap()
		if e.Level != c.level || fields["event"] != c.event || fields["upstream"] != c.upstream || fields["tool"] != c.tool {
			t.Errorf("line %d: %v %q %v, want %v event %s upstream %s tool %s", i, e.Level, e.Message, fields, c.level, c.event, c.upstream, c.tool)
		}
		if gotErr, _ := fields["error"].(string); gotErr != c.err {
			t.Errorf("line %d: error %q, want %q", i, gotErr, c.err)
		}
	}
}
