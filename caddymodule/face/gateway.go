package face

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Gateway is what a face may ask of the mcp_gateway handler it serves in.
type Gateway interface {
	// Request makes an internal modern request on r's behalf (r's
	// principal, authorization and origin; none of its MCP, conditional
	// or encoding headers), with ctx as its life, served by the gateway
	// into rec. It returns the URL of the upstream that served it ("" when
	// none did), or why it could not be served (the detail never names an
	// upstream; the log says more).
	Request(ctx context.Context, r *http.Request, in Internal, rec http.ResponseWriter) (upstream string, f *Failure)

	// Principal is the hash of r's principal (a request forwarded by
	// another instance: the one that instance evaluated).
	Principal(r *http.Request) [16]byte

	// CheckRequest applies the endpoint's request-target, Origin and Host
	// checks to r.
	CheckRequest(r *http.Request) *jsonrpc.RPCError

	// ReadBody reads r's body, bounded by max_request_body (413 beyond).
	ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, *jsonrpc.RPCError)

	// Keyring seals and opens tokens (state_key).
	Keyring() *seal.Keyring

	// Instance is this instance's id in the fleet.
	Instance() string

	// Logger is the handler's logger.
	Logger() *zap.Logger

	// Limits are the handler's limits that faces apply too.
	Limits() Limits

	// Track registers work no client can pick up again (a call running
	// in the background): cancel is called when Caddy exits. The
	// returned func removes it; it must be called when the work ends.
	Track(cancel context.CancelCauseFunc) (done func())

	// Stopping reports whether this instance is stopping (a graceful stop
	// has begun): a face refuses new work then, 503 with Retry-After
	// StoppingRetryAfter and StoppingMessage's words, as the MCP endpoint
	// does, so that a balancer sends it to another instance.
	Stopping() bool

	// UseOnce records the token id of purpose (a face's kind of token) as
	// used until expires, the token's expiry: nil the first time, on
	// whichever instance; ErrUsed after that. With state_key configured
	// the use is recorded in Caddy's storage, so that it holds across
	// every instance sharing the storage; without, tokens do not cross
	// instances and this instance's memory is enough. An error wrapping
	// ErrUseUnrecorded means the use could not be checked or recorded
	// (the storage failed): the token stays unused and the caller must
	// not go on.
	UseOnce(ctx context.Context, purpose string, id [16]byte, expires time.Time) error

	// Traced names the tool call r serves, for r's span when tracing is
	// on: its tool (gen_ai.tool.name), and a link to the span of the
	// call's first request, first (the one its token or record carries;
	// zero when r is that first request, or its token predates traces).
	// It returns what the call's next token or record carries on: first,
	// or r's own span when first is zero (zero when tracing is off).
	Traced(r *http.Request, tool string, first seal.TraceRef) seal.TraceRef
}

// What a stopping instance answers a request (Gateway.Stopping).
const (
	// StoppingRetryAfter is the Retry-After (seconds) of its 503s, and of
	// a request the gateway ended itself: a client or balancer retrying
	// after it reaches another instance, this one being gone by then.
	StoppingRetryAfter = "1"
	// StoppingMessage says why it refuses.
	StoppingMessage = "this gateway instance is stopping: send the request again (another instance will take it)"
)

// Errors of Gateway.UseOnce.
var (
	// ErrUsed: the token was used before.
	ErrUsed = errors.New("already used")
	// ErrUseUnrecorded: the token's use could not be recorded.
	ErrUseUnrecorded = errors.New("the token's use could not be recorded")
)

// Limits are the handler's options a face applies to its own work.
type Limits struct {
	MaxRounds      int           // max_rounds
	ParkTTL        time.Duration // park_ttl
	Lease          time.Duration // task_lease
	MaxResult      int64         // max_task_result
	MaxRequestBody int64         // max_request_body
	WriteTimeout   time.Duration // write_timeout (negative: none)
	SharedKey      bool          // state_key is configured (not a random key made at start)
	DurableTasks   bool          // task records are kept in storage (task_store storage): a task outlives its instance
}

// Internal is an internal request a face makes.
type Internal struct {
	Method string
	// Name is the request's Mcp-Name ("" for none).
	Name   string
	Params any
	// On routes the request to a route decided for an earlier request of
	// the client (a multi-turn session's upstream); nil: routed as any
	// modern request.
	On *Route
	// Task, for a tools/call, asks the gateway to host the call as a task
	// of the Tasks extension at once, whatever the task rules: the answer
	// is then a CreateTaskResult whose taskId tasks/get, tasks/update and
	// tasks/cancel (made through Request too) follow, and with a task
	// store another instance carries the call on when this one goes. Only
	// a call on a legacy upstream is hosted (one on a modern upstream is
	// passed through as it is), and only while a task place is left.
	Task bool
}

// Route is where the front door sends a legacy client's request: what a
// RouteFace sees of the routing decision.
type Route struct {
	// Upstream is the URL of the upstream of the request's session.
	Upstream string
	// Modern is true when that upstream is modern (the reverse bridge's
	// cell), false when it is legacy (pinned pass-through).
	Modern bool
}

// Message is a POSTed JSON-RPC message as the front door read it.
type Message struct {
	// Method is its method ("" for a response), clipped.
	Method string
	// Body is the whole body, checked for depth.
	Body []byte
}

// A Face is one face of the gateway. It implements one or more of the
// hooks below, which the front door asks in turn.
type Face interface {
	// Name names the face in logs.
	Name() string
}

// PathFace serves the requests it claims by their path, before the MCP
// endpoint reads them (the REST face). A request another instance
// forwarded is MCP, whatever its path: it never reaches a PathFace.
type PathFace interface {
	Face
	// ServePath serves r and reports true, or reports false to leave r to
	// the MCP endpoint.
	ServePath(w http.ResponseWriter, r *http.Request) (bool, error)
}

// SessionFace opens a session id of a kind of its own before the request
// is routed (the multi-turn opt-in): it returns the writer and request
// to serve the request with (r carrying the session id the gateway
// knows), or w and r as they are.
type SessionFace interface {
	Face
	OpenSession(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request)
}

// MessageFace serves the POSTed messages it claims, once read (the saga's
// methods; a turn's answers), or returns the writer to serve the message
// with (w itself when it has nothing to add).
type MessageFace interface {
	Face
	ServeMessage(w http.ResponseWriter, r *http.Request, m Message) (handled bool, w2 http.ResponseWriter, err error)
}

// RouteFace serves a legacy client's request once the front door has
// routed it to its session's upstream (a multi-turn tools/call), or
// reports false to let the front door serve it.
type RouteFace interface {
	Face
	ServeRouted(w http.ResponseWriter, r *http.Request, m Message, id json.RawMessage, rt Route) (bool, error)
}
