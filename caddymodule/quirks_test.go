package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// TestRepairQuirks: each repair makes a header say what a modern body
// says, and nothing else; the request is then validated as any other, so
// a header that still disagrees with the body is refused (-32020).
func TestRepairQuirks(t *testing.T) {
	const (
		modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"claude-ai","version":"0.1.0"}}`
		call       = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"echo","arguments":{}}}`
		list       = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + modernMeta + `}}`
		odd        = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"日本 ","arguments":{}}}`
		future     = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`
	)
	const legacy = 1
	both := []string{quirkProtocolHeader, quirkMethodHeader}
	claude := map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
	cases := []struct {
		name     string
		quirks   []string
		hdr      map[string]string
		body     string
		repaired []string // the repairs counted
		code     int      // ValidateModern's code after the repair; 0: valid; legacy: not a modern request
		want     map[string]string
	}{
		{"claude, off", nil, claude, call, nil, jsonrpc.HeaderMismatch, nil},
		{"claude, repaired", []string{quirkProtocolHeader}, claude, call, []string{quirkProtocolHeader}, 0,
			map[string]string{"MCP-Protocol-Version": "2026-07-28"}},
		{"claude, other repair only", []string{quirkMethodHeader}, claude, call, nil, jsonrpc.HeaderMismatch, nil},
		{"claude, method still wrong", both, map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/list", "Mcp-Name": "echo"}, call,
			[]string{quirkProtocolHeader}, jsonrpc.HeaderMismatch, nil},
		{"header not a legacy revision", both, map[string]string{"MCP-Protocol-Version": "v999.0.0", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, call,
			nil, jsonrpc.HeaderMismatch, nil},
		{"header repeated", both, map[string]string{"MCP-Protocol-Version": "2025-11-25", "mcp-protocol-version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, call,
			nil, jsonrpc.HeaderMismatch, nil},
		{"body version not served", both, map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/list"}, future,
			nil, jsonrpc.HeaderMismatch, nil},
		{"bridge, off", nil, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, call, nil, jsonrpc.HeaderMismatch, nil},
		{"bridge, repaired", []string{quirkMethodHeader}, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, call,
			[]string{quirkMethodHeader}, 0, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "echo"}},
		{"bridge, a list", []string{quirkMethodHeader}, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, list,
			[]string{quirkMethodHeader}, 0, map[string]string{"Mcp-Method": "tools/list", "Mcp-Name": ""}},
		{"bridge, name needs Base64", []string{quirkMethodHeader}, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, odd,
			[]string{quirkMethodHeader}, 0, map[string]string{"Mcp-Name": "=?base64?5pel5pysIA==?="}},
		{"bridge, name present and wrong", []string{quirkMethodHeader}, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Name": "other"}, call,
			[]string{quirkMethodHeader}, jsonrpc.HeaderMismatch, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "other"}},
		{"both repairs", both, map[string]string{"MCP-Protocol-Version": "2025-06-18"}, call,
			both, 0, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"}},
		{"a legacy body", both, map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": "s"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, nil, legacy, map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			h := &Handler{logger: zap.NewNop(), metrics: newGatewayMetrics(reg), quirks: newQuirkSet(c.quirks)}
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(c.body))
			for k, v := range c.hdr {
				r.Header.Add(k, v) // two spellings of a name: the header repeated
			}
			h.repairQuirks(r, []byte(c.body))
			for k, v := range c.want {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if got := repairsCounted(t, reg); !slices.Equal(got, c.repaired) {
				t.Errorf("counted %v, want %v", got, c.repaired)
			}
			if c.code == legacy {
				if era := translate.ClassifyRequest(r.Header, []byte(c.body)); era != translate.EraLegacy {
					t.Errorf("era %v, want legacy", era)
				}
				return
			}
			_, rerr := translate.ValidateModern(http.MethodPost, r.Header, []byte(c.body), supportedModern)
			switch {
			case c.code == 0 && rerr != nil:
				t.Errorf("refused after the repair: %d %s", rerr.Code, rerr.Message)
			case c.code != 0 && (rerr == nil || rerr.Code != c.code):
				t.Errorf("got %v, want code %d", rerr, c.code)
			}
		})
	}
}

// repairsCounted returns the repairs counted once each in
// client_quirks_repaired_total, in clientQuirks' order.
func repairsCounted(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range families {
		if f.GetName() != "caddy_mcp_gateway_client_quirks_repaired_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v != 1 {
				t.Errorf("%v counted %v times", m.GetLabel(), v)
			}
			got = append(got, m.GetLabel()[0].GetValue())
		}
	}
	slices.SortFunc(got, func(a, b string) int { return slices.Index(clientQuirks, a) - slices.Index(clientQuirks, b) })
	return got
}

func TestCheckClientQuirks(t *testing.T) {
	if err := checkClientQuirks(clientQuirks); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"lenient": `unknown repair "lenient"`,
		"missing_method_header missing_method_header": "listed twice",
	} {
		if err := checkClientQuirks(strings.Fields(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
