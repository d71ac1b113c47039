package forward

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// resumableUpstream is askServer (go-sdk v1.8) with an event store: its
// streams' events carry ids, and replay after Last-Event-ID.
func resumableUpstream(t *testing.T) (string, *mcp.Server) {
	t.Helper()
	url, server, _ := countedResumableUpstream(t)
	return url, server
}

// countedResumableUpstream is resumableUpstream, counting the GETs that
// reopen a stream (with Last-Event-ID).
func countedResumableUpstream(t *testing.T) (string, *mcp.Server, *atomic.Int32) {
	t.Helper()
	server := askServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	var reopens atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			// Only a reopening the upstream takes counts: under load it may
			// answer 409 while it still writes to the stream's previous
			// connection, and the gateway asks again (legacy/resume.go).
			w = &reopenCounter{ResponseWriter: w, n: &reopens}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, server, &reopens
}

// reopenCounter counts, in n, the GETs with Last-Event-ID the upstream
// answers 200.
type reopenCounter struct {
	http.ResponseWriter
	n      *atomic.Int32
	headed bool
}

func (c *reopenCounter) WriteHeader(code int) {
	if !c.headed && code == http.StatusOK {
		c.n.Add(1)
	}
	c.headed = true
	c.ResponseWriter.WriteHeader(code)
}

func (c *reopenCounter) Write(b []byte) (int, error) {
	if !c.headed {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

func (c *reopenCounter) Flush() {
	if !c.headed {
		c.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

func (c *reopenCounter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// fleet is n bridges sharing one key and nothing else (each its own pool),
// as instances sharing only state_key, with options changed by set.
func fleet(t *testing.T, n int, set ...func(*Options)) []*Bridge {
	t.Helper()
	kr, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	var out []*Bridge
	for i := range n {
		p := legacy.NewPool(legacy.PoolOptions{MaxSessions: 100, IdleTimeout: time.Minute, Client: http.DefaultClient})
		o := DefaultOptions()
		o.Keyring, o.Instance = kr, fmt.Sprintf("gw-%d", i)
		for _, f := range set {
			f(&o)
		}
		b := New(p, o)
		t.Cleanup(func() { b.Close(); p.Close() })
		out = append(out, b)
	}
	return out
}

func resumeRequest(t *testing.T, upstream string, id, rounds int, extra string) Request {
	r := askRequest(t, upstream, id, rounds, extra)
	r.Resume = true
	return r
}

// answerRound returns the retry of a's input_required round answering its
// one question with value.
func answerRound(t *testing.T, a *recordedAnswer, value string) (extra, key string) {
	t.Helper()
	res := gjson.GetBytes(a.final, "result")
	if res.Get("resultType").String() != "input_required" {
		t.Fatalf("not input_required: %d %s", a.status, a.final)
	}
	res.Get("inputRequests").ForEach(func(k, _ gjson.Result) bool { key = k.String(); return false })
	return fmt.Sprintf(`,"inputResponses":{%q:{"action":"accept","content":{"a":%q}}},"requestState":%q`,
		key, value, res.Get("requestState").String()), key
}

// TestResumeCallGoSDK: in front of a go-sdk server with an event store, a
// call parks holding nothing (no parked entry, no session in the pool) and
// its rounds are served by whichever instance the retry reaches; the
// result is the upstream's, the session is ended upstream at the end, and
// the used states do not open again, here or elsewhere.
func TestResumeCallGoSDK(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs := fleet(t, 3)
	a := serve(bs[0], resumeRequest(t, upstream, 1, 3, ""))
	var states []string
	for round := 1; ; round++ {
		res := gjson.GetBytes(a.final, "result")
		if res.Get("resultType").String() == "complete" {
			if got := res.Get("content.0.text").String(); got != "accept:x1,accept:x2,accept:x3" || round != 4 {
				t.Fatalf("after %d rounds: %s", round-1, a.final)
			}
			// As a call parked holding its stream: the upstream's
			// serverInfo in the result's _meta.
			if name := res.Get(`_meta.io\.modelcontextprotocol/serverInfo.name`).String(); name != "bridge-test" {
				t.Fatalf("no serverInfo in the resumed call's result: %s", a.final)
			}
			break
		}
		parker := bs[(round-1)%2]
		if p := parker.Parked(); p != 0 {
			t.Fatalf("round %d: %d calls parked holding", round, p)
		}
		if _, idle := parker.pool.Stats(); idle != 0 {
			t.Fatalf("round %d: %d idle sessions in the parking instance's pool", round, idle)
		}
		if n := sessionsOf(server); n != 1 {
			t.Fatalf("round %d: %d upstream sessions", round, n)
		}
		extra, key := answerRound(t, a, fmt.Sprintf("x%d", round))
		if want := fmt.Sprintf("elicitation-%d", round); key != want {
			t.Fatalf("round %d: key %q, want %q (keys never repeat within a call)", round, key, want)
		}
		states = append(states, gjson.GetBytes(a.final, "result.requestState").String())
		a = serve(bs[round%2], resumeRequest(t, upstream, 1+round, 3, extra))
	}
	waitNoSessions(t, server)
	for i, st := range states {
		for j, b := range bs {
			again := serve(b, resumeRequest(t, upstream, 10, 3, fmt.Sprintf(`,"inputResponses":{"elicitation-%d":{"action":"accept","content":{"a":"evil"}}},"requestState":%q`, i+1, st)))
			if again.status == http.StatusOK {
				t.Fatalf("state %d replayed on instance %d: %s", i, j, again.final)
			}
			if strings.Contains(string(again.final), "127.0.0.1") {
				t.Fatalf("an address in %s", again.final)
			}
		}
	}
}

// TestResumeAsksAgain: a retry without the answer is asked again, with the
// same key, by an instance that resumed the call; then it completes.
func TestResumeAsksAgain(t *testing.T) {
	upstream, server := resumableUpstream(t)
	bs := fleet(t, 2)
	a := serve(bs[0], resumeRequest(t, upstream, 1, 1, ""))
	state := gjson.GetBytes(a.final, "result.requestState").String()
	a = serve(bs[1], resumeRequest(t, upstream, 2, 1, fmt.Sprintf(`,"inputResponses":{},"requestState":%q`, state)))
	extra, key := answerRound(t, a, "late")
	if key != "elicitation-1" || bs[1].Parked() != 0 {
		t.Fatalf("asked again with key %q, %d parked holding", key, bs[1].Parked())
	}
	a = serve(bs[0], resumeRequest(t, upstream, 3, 1, extra))
	if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:late" {
		t.Fatalf("final %d %s", a.status, a.final)
	}
	waitNoSessions(t, server)
}

// TestResumeSessionGone: an upstream restarted while the call was parked
// (a fresh server behind the same address knows no session) gives the
// retry a clear error, with no address, at once.
func TestResumeSessionGone(t *testing.T) {
	var current atomic.Pointer[http.Handler]
	handler := func() *http.Handler {
		server := askServer()
		h := http.Handler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server },
			&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
		return &h
	}
	current.Store(handler())
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*current.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	bs := fleet(t, 2)
	a := serve(bs[0], resumeRequest(t, ts.URL, 1, 1, ""))
	extra, _ := answerRound(t, a, "x")
	current.Store(handler()) // restarted
	a = serve(bs[1], resumeRequest(t, ts.URL, 2, 1, extra))
	msg := gjson.GetBytes(a.final, "error.message").String()
	if a.status != http.StatusBadGateway || gjson.GetBytes(a.final, "error.code").Int() != jsonrpc.InternalError ||
		!strings.Contains(msg, "no longer knows the call") || strings.Contains(msg, "127.0.0.1") {
		t.Fatalf("retry: %d %s", a.status, a.final)
	}
}

// TestResumeHeldOtherwise: with resume off, or in front of an upstream
// whose events carry no ids, a call parks holding its stream, as before.
func TestResumeHeldOtherwise(t *testing.T) {
	resumable, _ := resumableUpstream(t)
	plain, _ := legacyUpstream(t)
	for name, r := range map[string]Request{
		"resume off":  askRequest(t, resumable, 1, 1, ""),
		"no event id": resumeRequest(t, plain, 1, 1, ""),
	} {
		b := fleet(t, 1)[0]
		a := serve(b, r)
		extra, _ := answerRound(t, a, "v")
		if b.Parked() != 1 {
			t.Fatalf("%s: %d parked holding", name, b.Parked())
		}
		r2 := askRequest(t, r.Upstream, 2, 1, extra)
		r2.Resume = r.Resume
		if got := gjson.GetBytes(serve(b, r2).final, "result.content.0.text").String(); got != "accept:v" {
			t.Fatalf("%s: final %q", name, got)
		}
	}
}

// TestResumeBounded: calls parked holding nothing still take a place for
// their state's life: max_parked_per_principal refuses the principal's next
// one (429), cancelled upstream, while a call already admitted goes on to
// its end.
func TestResumeBounded(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs := fleet(t, 1)
	o := DefaultOptions()
	o.Keyring, o.Instance, o.MaxParkedPerPrincipal = bs[0].defaults.Keyring, "gw-0", 2
	opts := o.Ready()
	req := func(id int, extra string) Request {
		r := resumeRequest(t, upstream, id, 2, extra)
		r.Options = opts
		return r
	}
	first := serve(bs[0], req(1, ""))
	serve(bs[0], req(2, ""))
	if a := serve(bs[0], req(3, "")); a.status != http.StatusTooManyRequests {
		t.Fatalf("third call of the principal: %d %s", a.status, a.final)
	}
	extra, _ := answerRound(t, first, "x1")
	second := serve(bs[0], req(4, extra))
	extra, _ = answerRound(t, second, "x2")
	if got := gjson.GetBytes(serve(bs[0], req(5, extra)).final, "result.content.0.text").String(); got != "accept:x1,accept:x2" {
		t.Fatalf("the admitted call: %q", got)
	}
}

// TestResumeSequentialRounds: a state used on the instance that parked it
// frees its place there at once, and the call goes on with the session
// it parked with, which goes back to the pool at the end: one principal's
// calls, one after the other, never meet max_parked_per_principal, and
// share one upstream session.
func TestResumeSequentialRounds(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	b := fleet(t, 1)[0]
	o := DefaultOptions()
	o.Keyring, o.Instance, o.MaxParkedPerPrincipal = b.defaults.Keyring, "gw-0", 1
	opts := o.Ready()
	for i := range 5 {
		r := resumeRequest(t, upstream, 10*i, 2, "")
		r.Options = opts
		a := serve(b, r)
		for round := 1; round <= 2; round++ {
			extra, _ := answerRound(t, a, "v")
			r := resumeRequest(t, upstream, 10*i+round, 2, extra)
			r.Options = opts
			a = serve(b, r)
		}
		if got := gjson.GetBytes(a.final, "result.content.0.text").String(); got != "accept:v,accept:v" {
			t.Fatalf("call %d: %d %s", i, a.status, a.final)
		}
	}
	if st := b.pool.StatsByUpstream()[upstream]; st.Initialized != 1 || st.Open != 1 || st.Idle != 1 {
		t.Fatalf("upstream sessions: %+v, want one, initialized once, idle in the pool", st)
	}
}

// resumeCounter counts ResumeObserver events (and nothing else).
type resumeCounter struct {
	mu     sync.Mutex
	events map[string]int
}

func (r *resumeCounter) CallEnded(translate.CallReport) {}
func (r *resumeCounter) Unparked(string)                {}
func (r *resumeCounter) Resumable(event string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[event]++
}

// TestResumeObserved: the observer learns of a call parked holding no
// stream, of its resumption, and of an upstream that lost it.
func TestResumeObserved(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	b := fleet(t, 1)[0]
	obs := &resumeCounter{events: map[string]int{}}
	o := DefaultOptions()
	o.Keyring, o.Instance, o.Observer = b.defaults.Keyring, "gw-0", obs
	opts := o.Ready()
	req := func(id int, extra string) Request {
		r := resumeRequest(t, upstream, id, 1, extra)
		r.Options = opts
		return r
	}
	extra, _ := answerRound(t, serve(b, req(1, "")), "v")
	serve(b, req(2, extra))
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.events[ResumeParked] != 1 || obs.events[ResumeResumed] != 1 || obs.events[ResumeGone] != 0 {
		t.Fatalf("events %v", obs.events)
	}
}

// TestResumeParkedListed: a call parked holding nothing is listed by the
// instance that parked it (ParkedCalls, the admin API's
// /mcp_gateway/parked) as holding nothing, with what the place knows and no
// principal; a call parked holding its stream is listed as holding it.
// Once the retry is served here, the entry leaves.
func TestResumeParkedListed(t *testing.T) {
	upstream, _ := resumableUpstream(t)
	bs := fleet(t, 1)
	a := serve(bs[0], resumeRequest(t, upstream, 1, 2, ""))
	list := bs[0].ParkedCalls()
	if len(list) != 1 {
		t.Fatalf("parked %+v, want the one call parked holding nothing", list)
	}
	p := list[0]
	if p.Holding != HoldingNothing || !p.Resumable || p.Upstream != upstream || p.Method != "tools/call" ||
		p.Name != "ask" || p.Round != 1 || p.Waiting != 1 || p.Started.IsZero() || !p.Expires.After(time.Now()) {
		t.Fatalf("parked %+v", p)
	}
	extra, _ := answerRound(t, a, "x1")
	serve(bs[0], resumeRequest(t, upstream, 2, 2, extra))
	if list := bs[0].ParkedCalls(); len(list) != 1 || list[0].Round != 2 || list[0].Holding != HoldingNothing {
		t.Fatalf("after the first retry: %+v, want the call in round 2 only", list)
	}

	serve(bs[0], askRequest(t, upstream, 3, 1, ""))
	var holding []string
	for _, p := range bs[0].ParkedCalls() {
		holding = append(holding, p.Holding)
	}
	if len(holding) != 2 || holding[0] != HoldingNothing || holding[1] != HoldingStream {
		t.Fatalf("holding %v, want the resumable call first (parked first), then the held one", holding)
	}
}
