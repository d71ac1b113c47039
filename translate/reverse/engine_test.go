package reverse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// modernUpstream is a real modern-only server (go-sdk, stateless) whose
// tool `rounds` asks {n} elicitation rounds, keeping the answers so far in
// requestState, and then reports them.
func modernUpstream(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "reverse-test", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "rounds", Description: "Asks n times."},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			var got []string
			if req.Params.RequestState != "" {
				got = strings.Split(req.Params.RequestState, ",")
			}
			if e, ok := req.Params.InputResponses[fmt.Sprint("q", len(got))].(*mcp.ElicitResult); ok && e.Action == "accept" {
				got = append(got, fmt.Sprint(e.Content["answer"]))
			}
			if len(got) >= in.N {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answers: " + strings.Join(got, ",")}}}, nil, nil
			}
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{fmt.Sprint("q", len(got)): &mcp.ElicitParams{
					Message:         fmt.Sprint("Question ", len(got)),
					RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}},
				}},
				RequestState: strings.Join(got, ","),
			}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// recordingSink keeps what the bridge sends to the legacy client.
type recordingSink struct {
	notes chan []byte
	final chan sinkResponse
}

type sinkResponse struct {
	status int
	msg    []byte
}

func newRecordingSink() *recordingSink {
	return &recordingSink{notes: make(chan []byte, 64), final: make(chan sinkResponse, 1)}
}

func (s *recordingSink) Notify(msg []byte) error {
	s.notes <- append([]byte(nil), msg...)
	return nil
}

func (s *recordingSink) Respond(status int, msg []byte) error {
	s.final <- sinkResponse{status, append([]byte(nil), msg...)}
	return nil
}

func newTestReverse(t *testing.T) *Bridge {
	t.Helper()
	kr, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	return New(http.DefaultClient, reverseOptions(func(o *Options) { o.Keyring, o.Instance, o.RoundTimeout = kr, "0123456789abcdef", 5*time.Second }))
}

// openSession initializes a legacy session on rv for principal.
func openSession(t *testing.T, rv *Bridge, upstream, principal, caps string) *Session {
	t.Helper()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"t","version":"1"}}}`)
	resp, sid, rerr := rv.Initialize(context.Background(), InitRequest{Target: translate.Target{Upstream: upstream}, Principal: translate.PrincipalHash(principal), ID: []byte("1"), Body: body})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if v := gjson.GetBytes(resp, "result.serverInfo.name").String(); v != "reverse-test" {
		t.Fatalf("initialize response %s", resp)
	}
	s, err := rv.Open(nil, string(sid), translate.PrincipalHash(principal), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func callRequest(t *testing.T, id int, n int) Request {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"rounds","arguments":{"n":%d}}}`, id, n))
	msg, err := jsonrpc.Peek(body)
	if err != nil {
		t.Fatal(err)
	}
	return Request{Message: msg}
}

func wantNote(t *testing.T, sink *recordingSink) gjson.Result {
	t.Helper()
	select {
	case n := <-sink.notes:
		return gjson.ParseBytes(n)
	case f := <-sink.final:
		t.Fatalf("the call ended (HTTP %d %s) instead of asking", f.status, f.msg)
	case <-time.After(5 * time.Second):
		t.Fatal("no in-line request within 5s")
	}
	return gjson.Result{}
}

func wantFinal(t *testing.T, sink *recordingSink) sinkResponse {
	t.Helper()
	select {
	case f := <-sink.final:
		return f
	case n := <-sink.notes:
		t.Fatalf("another in-line request instead of the end: %s", n)
	case <-time.After(5 * time.Second):
		t.Fatal("no answer within 5s")
	}
	return sinkResponse{}
}

// TestReverseEngineRounds: concurrent calls on separate sessions each go
// through their rounds; answers reach only their own round (run with
// -race).
func TestReverseEngineRounds(t *testing.T) {
	up := modernUpstream(t)
	rv := newTestReverse(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		s := openSession(t, rv, up, "p"+strconv.Itoa(c), `{"elicitation":{}}`)
		req := callRequest(t, 100+c, 3)
		wg.Go(func() {
			sink := newRecordingSink()
			go rv.Serve(context.Background(), s, req, sink)
			for round := range 3 {
				var q gjson.Result
				select {
				case n := <-sink.notes:
					q = gjson.ParseBytes(n)
				case f := <-sink.final:
					errs <- fmt.Errorf("call %d round %d ended: HTTP %d %s", c, round, f.status, f.msg)
					return
				case <-time.After(5 * time.Second):
					errs <- fmt.Errorf("call %d round %d: nothing asked within 5s", c, round)
					return
				}
				if q.Get("method").String() != translate.MethodElicit || q.Get("params.message").String() != fmt.Sprint("Question ", round) {
					errs <- fmt.Errorf("call %d round %d asked %s", c, round, q.Raw)
					return
				}
				answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"answer":"c%dr%d"}}}`, q.Get("id").Raw, c, round)
				if rerr := rv.Answer(s, []byte(answer)); rerr != nil {
					errs <- fmt.Errorf("call %d round %d: answer refused: %v", c, round, rerr)
					return
				}
			}
			var f sinkResponse
			select {
			case f = <-sink.final:
			case <-time.After(5 * time.Second):
				errs <- fmt.Errorf("call %d: no result within 5s", c)
				return
			}
			want := fmt.Sprintf("answers: c%dr0,c%dr1,c%dr2", c, c, c)
			if got := gjson.GetBytes(f.msg, "result.content.0.text").String(); f.status != http.StatusOK || got != want ||
				gjson.GetBytes(f.msg, "id").Int() != int64(100+c) {
				errs <- fmt.Errorf("call %d ended HTTP %d %s, want %q", c, f.status, f.msg, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := rv.Waiting(); n != 0 {
		t.Errorf("%d in-line requests still wait", n)
	}
}

// TestReverseEngineAbandon: cancellation and a client that leaves end the
// round; its in-line request no longer takes answers.
func TestReverseEngineAbandon(t *testing.T) {
	up := modernUpstream(t)
	rv := newTestReverse(t)
	s := openSession(t, rv, up, "p", `{"elicitation":{}}`)

	t.Run("notifications/cancelled", func(t *testing.T) {
		sink := newRecordingSink()
		go rv.Serve(context.Background(), s, callRequest(t, 7, 2), sink)
		q := wantNote(t, sink)
		cancel := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
		msg, _ := jsonrpc.Peek(cancel)
		csink := newRecordingSink()
		rv.Serve(context.Background(), s, Request{Message: msg}, csink)
		if f := wantFinal(t, csink); f.status != http.StatusAccepted {
			t.Fatalf("the notification got HTTP %d", f.status)
		}
		if f := wantFinal(t, sink); f.status != http.StatusAccepted || len(f.msg) != 0 {
			t.Fatalf("a cancelled call answered HTTP %d %s; want nothing", f.status, f.msg)
		}
		if rerr := rv.Answer(s, []byte(`{"jsonrpc":"2.0","id":`+q.Get("id").Raw+`,"result":{"action":"accept"}}`)); rerr == nil || rerr.HTTPStatus != http.StatusBadRequest {
			t.Fatalf("an answer after cancellation: %v", rerr)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		ctx, leave := context.WithCancel(context.Background())
		sink := newRecordingSink()
		go rv.Serve(ctx, s, callRequest(t, 8, 2), sink)
		wantNote(t, sink)
		leave()
		wantFinal(t, sink)
		if n := rv.Waiting(); n != 0 {
			t.Fatalf("%d in-line requests still wait after the client left", n)
		}
	})
	t.Run("missing capability", func(t *testing.T) {
		bare := openSession(t, rv, up, "p", `{}`)
		sink := newRecordingSink()
		rv.Serve(context.Background(), bare, callRequest(t, 9, 1), sink)
		f := wantFinal(t, sink)
		if !gjson.GetBytes(f.msg, "result.isError").Bool() || !strings.Contains(string(f.msg), "did not declare the capability") {
			t.Fatalf("want an isError result, got %s", f.msg)
		}
	})
}

func TestReverseEngineOpen(t *testing.T) {
	up := modernUpstream(t)
	rv := newTestReverse(t)
	s := openSession(t, rv, up, "alice", `{}`)
	kr := rv.defaults.Keyring
	sid, err := seal.SealClientSession(kr, s.ClientSession)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := rv.Open(nil, string(sid), translate.PrincipalHash("mallory"), now); !errors.Is(err, ErrNoSession) {
		t.Errorf("another principal: %v", err)
	}
	if _, err := rv.Open(nil, string(sid), translate.PrincipalHash("alice"), now.Add(25*time.Hour)); !errors.Is(err, ErrNoSession) {
		t.Errorf("after the lifetime: %v", err)
	}
	if _, err := rv.Open(nil, "garbage", translate.PrincipalHash("alice"), now); !errors.Is(err, ErrNoSession) {
		t.Errorf("garbage: %v", err)
	}
	rv.Delete(s)
	if _, err := rv.Open(nil, string(sid), translate.PrincipalHash("alice"), now); !errors.Is(err, ErrNoSession) {
		t.Errorf("deleted: %v", err)
	}
}

// TestReverseEngineMethodLength: a method name over MaxMethodLength is
// refused with 400 -32600 and reaches no upstream (the one here would
// answer -32601 to any name it does not know).
func TestReverseEngineMethodLength(t *testing.T) {
	rv := newTestReverse(t)
	s := openSession(t, rv, modernUpstream(t), "p", `{}`)
	for n, want := range map[int]int{translate.MaxMethodLength: jsonrpc.MethodNotFound, translate.MaxMethodLength + 1: jsonrpc.InvalidRequest, 1 << 20: jsonrpc.InvalidRequest} {
		msg, err := jsonrpc.Peek([]byte(`{"jsonrpc":"2.0","id":2,"method":"` + strings.Repeat("m", n) + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		sink := newRecordingSink()
		rv.Serve(context.Background(), s, Request{Message: msg}, sink)
		f := wantFinal(t, sink)
		if code := gjson.GetBytes(f.msg, "error.code").Int(); code != int64(want) {
			t.Errorf("a method of %d bytes: HTTP %d %.200s; want %d", n, f.status, f.msg, want)
		}
	}
}
