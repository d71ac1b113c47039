package forward

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Options configure the forward bridge's calls: those of one
// configuration (one mcp_gateway handler), which passes them with each
// Request, or the bridge's own for requests without. They are taken as
// given, with no defaulting here: start from DefaultOptions, which
// holds the documented defaults, and set what differs.
type Options struct {
	// Keyring seals and opens requestState. Required.
	Keyring *seal.Keyring
	// Instance names this gateway instance inside the requestState it seals.
	Instance string
	// Address is this instance's advertised base URL, sealed into the
	// requestState so that another instance can forward the retry here
	// without a peer list ("" for none).
	Address string
	// ParkTTL is how long a parked call waits for the client's retry.
	ParkTTL time.Duration
	// MaxParked bounds the calls parked with these options (the same
	// *Options): a call counts from its first park until it ends,
	// its later rounds included. When full, a new call that wants to park
	// is refused (503, -32603) and cancelled upstream; no parked call is
	// ended to make room (see admit.go). Calls parked with other
	// options do not count.
	MaxParked int
	// MaxParkedPerPrincipal bounds, within MaxParked, the calls of one
	// principal: at the bound the principal's new call is refused (429,
	// -32603) the same way.
	MaxParkedPerPrincipal int
	// GatherWindow is how long a round waits, after the upstream's first
	// request for input, for sibling requests to ask in the same round:
	// on the first round of a target (tool, prompt, resource), and on every
	// round of the targets that asked several at once (see gather.go;
	// others take the requests already there and park at once). Zero or
	// negative: no wait.
	GatherWindow time.Duration
	// ResumeLinger is how long a call that parks holding no stream
	// (resume.go) keeps its streams open all the same, for a retry
	// that comes back at once to this instance (linger.go). Zero
	// or negative: they close at once.
	ResumeLinger time.Duration
	// MaxRounds bounds the input_required rounds of one call (asking again
	// for missing or invalid answers counts).
	MaxRounds int
	// MaxInputsPerRound bounds the requests for input one round may hold.
	MaxInputsPerRound int
	// Lease bounds the upstream sessions a principal holds when a call
	// leases one, and how many messages a parked call holds unread.
	Lease legacy.LeaseLimits
	// Observer learns how calls end and parked calls leave (metrics,
	// logs). Optional.
	Observer translate.Observer
	// Client, if set, makes the upstream requests of the sessions these
	// options lease (a configured transport) instead of the pool's: such
	// sessions are kept apart from those of other clients (PoolKey.Client).
	// It must be comparable (a pointer). Optional.
	Client legacy.Doer
	// Tasks configure the tasks the bridge hosts for legacy tools
	// (task.go).
	Tasks TaskOptions

	ready bool // made by Ready
}

// DefaultOptions returns the documented defaults of the forward
// bridge's options, and is their one source: the gateway's Provision takes
// the defaults of the options a configuration leaves unset from here, and a
// caller outside Caddy starts from it. Keyring, Instance, Address and
// Observer are left unset.
func DefaultOptions() Options {
	return Options{
		ParkTTL:   translate.DefaultRoundTimeout,
		MaxParked: 10000,
		// 100 waiting questions is more than one person or agent answers
		// at once, and a hundredth of MaxParked: filling the table takes a
		// hundred identities.
		MaxParkedPerPrincipal: 100,
		GatherWindow:          2 * time.Millisecond,
		ResumeLinger:          defaultResumeLinger,
		MaxRounds:             translate.DefaultMaxRounds,
		MaxInputsPerRound:     translate.DefaultMaxInputsPerRound,
		Lease:                 legacy.LeaseLimits{MaxPerPrincipal: 1000, CallBuffer: legacy.DefaultCallBuffer},
		Tasks: TaskOptions{
			Policy: TaskPolicy{DefaultWindow: defaultTaskWindow},
			TTL:    defaultTaskTTL, PollInterval: defaultTaskPollInterval,
			MaxTasks: 1000, MaxTasksPerPrincipal: 100,
		},
	}
}

// Ready returns o as the options of one configuration, to be passed with
// every request of it: make it once, since the calls parked with one
// *Options share its MaxParked. o is taken as given (see
// DefaultOptions).
func (o Options) Ready() *Options {
	o.ready = true
	return &o
}

// Bridge serves modern (2026-07-28) clients from legacy upstreams: it leases
// upstream sessions initialized with the client's declared capabilities,
// reshapes results, and parks calls that ask for input until the client
// retries with inputResponses. The life of a call (start, run, park,
// resume, and its ends) is drawn in call.go.
type Bridge struct {
	pool     *legacy.Pool
	defaults *Options // of the requests that carry none
	gather   *gatherPolicy
	streams  *streamPolicy
	quick    *quickTargets // whose retries come back at once (linger.go)

	mu     sync.Mutex
	parked map[[16]byte]*call
	used   *seal.ReplayFilter        // resumable states used here (stateID)
	places map[[16]byte]*resumePlace // held by resumable states parked here (resume.go)
	sets   map[*Options]*parkSet     // places held per options (admit.go)
	closed bool
	// The probes of expired places (abandon.go), and abandonGrace:
	// how long after a state's expiry its probe waits; the checks of
	// places whose calls may have ended elsewhere (places.go).
	probes       *workQueue
	abandonGrace time.Duration
	checks       *workQueue
	checkAfter   time.Duration // placeCheckAfter, but in tests
	reclaiming   map[reclaimKey]*reclaimRun
	bySession    map[placeSession]*resumePlace
	// elsewhereAt is when a place here was last found finished on
	// another instance (unix ns; prime.go).
	elsewhereAt atomic.Int64
	parkedKeys  *lru.Cache[legacy.PoolKey, struct{}]

	// The tasks it holds (task.go), of both kinds: its own, and those
	// of upstreams with 2025 tasks (task_upstream.go); under tmu.
	tmu      sync.Mutex
	tasks    map[[16]byte]*task
	taskSets map[*Options]*taskSet
	taskRuns sync.WaitGroup // the tasks' runners (runTask)
	support  taskSupport    // the upstreams' own execution.taskSupport
	leases   *leaseKeeper   // this instance's lease on the tasks it owns (task_store.go)
	// sweepKeyrings open the records the lease keeper sweeps: the
	// keyrings of the options that claimed a lease, by ID (one per server
	// of a federated block, and per state_key).
	sweepKeyrings sync.Map   // uint32 -> *seal.Keyring
	lister        toolLister // when the bridge listed an upstream's tools itself
	// The listen streams following tasks (task_push.go), under wmu: by
	// task handle, and how many each principal has.
	wmu       sync.Mutex
	watches   map[[16]byte]map[*taskWatch]bool
	listeners map[[16]byte]int

	// ctx outlives every client request: upstream calls run in it, so a
	// parked call survives its first request.
	ctx    context.Context
	cancel context.CancelFunc
	// epoch, random, begins the handle of every call the bridge parks: a
	// state of this instance's naming another epoch names a call lost with
	// an earlier process (parkedBefore).
	epoch [handleEpoch]byte
}

// New returns a bridge using pool for upstream sessions, with opts
// for the requests that carry no options of their own.
func New(pool *legacy.Pool, opts Options) *Bridge {
	b := &Bridge{pool: pool, defaults: opts.Ready(), parked: make(map[[16]byte]*call),
		sets: make(map[*Options]*parkSet), gather: newGatherPolicy(), streams: newStreamPolicy(), quick: newQuickTargets(), used: seal.NewReplayFilter(maxUsedStates), places: make(map[[16]byte]*resumePlace),
		tasks: make(map[[16]byte]*task), taskSets: make(map[*Options]*taskSet), leases: newLeaseKeeper(),
		probes: &workQueue{workers: maxProbing, limit: maxAbandoned}, abandonGrace: defaultAbandonGrace,
		checks: &workQueue{workers: maxChecking, limit: maxChecksQueued}, checkAfter: placeCheckAfter, reclaiming: make(map[reclaimKey]*reclaimRun),
		bySession: make(map[placeSession]*resumePlace), parkedKeys: newParkedKeys()}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	_, _ = rand.Read(b.epoch[:])
	return b
}

// optionsOf returns the options r carries, or the bridge's own.
func (b *Bridge) optionsOf(r *Request) *Options {
	switch {
	case r.Options == nil:
		return b.defaults
	case !r.Options.ready:
		return r.Options.Ready()
	}
	return r.Options
}

// Parked returns how many calls are parked.
func (b *Bridge) Parked() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.parked)
}

// Close abandons every parked call (their upstream requests are answered
// and cancelled) and refuses new ones.
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	b.probes.close()
	b.checks.close()
	var all []*call
	for _, c := range b.parked {
		b.unparkLocked(c)
		all = append(all, c)
	}
	b.mu.Unlock()
	for _, c := range all {
		b.unparked(c, translate.ParkCancelled)
		b.abandon(c, translate.OutcomeCancelled, "gateway shutting down")
	}
	b.coolAll()
	handed := b.handOver()
	for _, t := range b.allTasks() {
		t.timer.Stop()
		if t.opts != nil && t.opts.Tasks.Store != nil {
			// Kept in the fleet's storage, but no other instance can go
			// on with its call: it fails, saying why, for good.
			b.stopTask(t, translate.TaskFailed, "", taskErrorObject(
				"the gateway instance running the task stopped, and its upstream call could not be resumed elsewhere: start the call again"))
			continue
		}
		b.cancelTask(t, "gateway shutting down")
	}
	b.taskRuns.Wait() // their calls abandoned upstream, or left for another instance
	for _, t := range handed {
		b.persist(t)
	}
	b.releaseLease()
	b.cancel()
}

// Request is one validated modern request for the bridge.
type Request struct {
	// Target is the legacy upstream and its per-upstream options.
	translate.Target
	// Principal identifies who is calling: PrincipalHash of the evaluated
	// principal expression (e.g. of Authorization). Sessions and parked
	// calls are never shared across principals.
	Principal [16]byte
	// Header is sent upstream with the session's requests.
	Header http.Header
	// Options are those of the configuration that received the request,
	// made by Ready (nil: the bridge's own). A call keeps the
	// options of its first request for its whole life (limits, park TTL,
	// observer); a retry's requestState is opened, and the next round's
	// sealed, with the options of the request carrying it.
	Options *Options
	// Failover, if set, is asked for another upstream when a new upstream
	// session could not be opened on Upstream and nothing of the request
	// reached it: the connection was refused, or dropped before the
	// upstream answered initialize (or, on an idle session the call
	// would have used, the connection of its first request was refused).
	// It points r at another upstream (its Target) and returns true, or
	// returns false to give up: the client then gets the error.
	// It must give up after finitely many calls (say, once per upstream).
	// It is never asked once the request may have reached an upstream,
	// nor for a retry carrying requestState, which belongs to the call it
	// resumes.
	Failover func(r *Request, cause error) bool
	// GiveBack, if set, sends n to the instance home (in a notice,
	// MarshalNotice), and returns nil once home took the session it names:
	// a call resumed here from a state parked there, which ends here,
	// gives its upstream session back to home's pool instead of ending it
	// (giveback.go). Nil: such sessions are ended.
	GiveBack func(ctx context.Context, home translate.Owner, n SessionNotice) error
	// OwnerGone, for tasks/get, tasks/update and tasks/cancel: the
	// instance the taskId names could not be reached (the caller's relay
	// failed). With a task store the bridge then serves the task from its
	// record (task_takeover.go), taking it over once its owner's lease
	// lapsed; without one it answers that the task is gone with it.
	OwnerGone bool
	// TargetOf, if set, returns the Target of a configured upstream by
	// URL: a task taken over resumes its call only on an upstream the
	// configuration still serves, reached as the configuration says.
	TargetOf func(url string) (translate.Target, bool)
	// HostTask marks a tools/call the gateway makes itself for a face
	// whose client cannot pick the call up again (the REST face's): the
	// call becomes a task the gateway hosts at once, whatever the task
	// rules and the request's capabilities, so that with a task store
	// another instance carries it on when this one goes (mayBecomeTask);
	// with no task place left it runs as a plain call.
	HostTask bool
	*translate.ModernRequest

	retry *openedState // the requestState as RetryOf opened it
	// hosting is the task rule of a call that may become a task.
	hosting *TaskRule
}

// openedState is a retry's requestState, opened and checked once.
type openedState struct {
	st   seal.State
	rs   *seal.ResumeState
	rerr *jsonrpc.RPCError
}

// bridgedMethods are the 2026-07-28 client requests a legacy server can
// serve through the bridge.
var bridgedMethods = map[string]bool{
	"server/discover": true, "subscriptions/listen": true, "completion/complete": true,
	"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
}

// Serve answers r through sink. It returns when the answer is complete
// (possibly with the call parked).
func (b *Bridge) Serve(ctx context.Context, r Request, sink translate.Sink) translate.Served {
	if r.Kind == jsonrpc.KindNotification {
		// notifications/cancelled is stdio-only in 2026-07-28; nothing else
		// is meaningful for a legacy upstream.
		_ = sink.Respond(http.StatusAccepted, nil)
		return translate.Served{}
	}
	if taskMethods[r.Method] {
		r.Options = b.optionsOf(&r)
		return b.serveTask(ctx, r, sink)
	}
	if !bridgedMethods[r.Method] {
		// A legacy server cannot serve other modern methods (the Tasks
		// extension's are not wire-compatible with 2025 tasks).
		_ = sink.Respond(http.StatusNotFound, jsonrpc.ErrorResponse(r.ID, jsonrpc.NewMethodNotFound(r.Method)))
		return translate.Served{Outcome: translate.OutcomeError}
	}
	r.Options = b.optionsOf(&r)
	params := translate.ParamsOf(r.Raw)
	if translate.InputCapable[r.Method] {
		if state := translate.StringField(params, "requestState"); state != "" {
			return b.resume(ctx, r, params, state, sink)
		}
	}
	started := time.Now()
	var tw *taskWatch // the tasks a listen follows (task_push.go)
	if r.Method == "subscriptions/listen" {
		var rerr *jsonrpc.RPCError
		if tw, rerr = b.watchTasks(r, params); rerr != nil {
			_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
			if rerr.Code == jsonrpc.MissingRequiredClientCapability {
				return translate.Served{Outcome: translate.OutcomeError}
			}
			return translate.Served{Outcome: translate.OutcomeRefused}
		}
		defer tw.close()
	}
	hosting, rerr := b.mayBecomeTask(r)
	if rerr != nil {
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		outcome := translate.OutcomeRefused
		if rerr.Code == jsonrpc.MissingRequiredClientCapability {
			outcome = translate.OutcomeError
		}
		b.report(unstarted(r, started), outcome, rerr.Message)
		return translate.Served{Outcome: outcome}
	}
	if rerr := b.roomBeforeStart(r); rerr != nil {
		if hosting != nil {
			b.releaseTaskPlace(r.Options, r.Principal)
		}
		// Refused before it reached the upstream: no side effect there.
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		c := unstarted(r, started)
		b.unparked(c, translate.ParkRefused)
		b.report(c, translate.OutcomeRefused, rerr.Message)
		return translate.Served{Outcome: translate.OutcomeRefused}
	}
	r.hosting = hosting
	c, rerr := b.start(ctx, &r, params) // may set r.hosting (learnToolTasks)
	if rerr != nil && r.hosting != nil {
		b.releaseTaskPlace(r.Options, r.Principal)
	}
	if rerr != nil {
		_ = sink.Respond(rerr.HTTPStatus, jsonrpc.ErrorResponse(r.ID, rerr))
		outcome := translate.OutcomeError
		if ctx.Err() != nil {
			outcome = translate.OutcomeCancelled // the client left, or the gateway is stopping
		}
		if r.Method != "server/discover" && r.Method != "subscriptions/listen" {
			// A call that never reached the upstream still ended.
			b.report(unstarted(r, started), outcome, rerr.Detail())
		}
		return translate.Served{Outcome: outcome, Cause: rerr.Cause}
	}
	switch r.Method {
	case "server/discover":
		return translate.Served{Outcome: b.discover(c, r, sink)}
	case "subscriptions/listen":
		b.listen(ctx, c, r, params, tw, sink)
		return translate.Served{}
	}
	if hosting = r.hosting; hosting != nil {
		c.taskRule, c.taskPlaced = hosting, true
		if c.upTask {
			// The upstream runs the task itself (task_upstream.go).
			return translate.Served{Outcome: b.createUpstreamTask(ctx, c, r, sink)}
		}
		if hosting.Window <= 0 {
			// The task exists before any question of the tool's.
			return translate.Served{Outcome: b.becomeTask(ctx, c, r, sink)}
		}
	}
	var fresh map[string]json.RawMessage
	if translate.InputCapable[r.Method] {
		fresh = translate.InputResponses(params)
	}
	outcome, cause := b.run(ctx, c, r, sink, fresh, false)
	return translate.Served{Outcome: outcome, Cause: cause}
}

// discover answers server/discover from the session's InitializeResult.
func (b *Bridge) discover(c *call, r Request, sink translate.Sink) string {
	defer b.pool.Release(c.key, c.sess, true)
	res, err := translate.BuildDiscoverResult(c.sess.InitResult, b.reshapeOptions(c))
	if err == nil && (r.Options.Tasks.Policy.Configured() || b.support.any(c.key.Upstream, r.Principal) || upstreamHasTasks(c.sess.InitResult)) {
		res, err = withTasksExtension(res)
	}
	if err != nil {
		_ = sink.Respond(http.StatusBadGateway, jsonrpc.ErrorResponse(r.ID, translate.BadGateway(err.Error())))
		return translate.OutcomeError
	}
	_ = sink.Respond(http.StatusOK, translate.ResultResponse(r.ID, res))
	return translate.OutcomeComplete
}

func (b *Bridge) reshapeOptions(c *call) translate.ReshapeOptions {
	return translate.ReshapeOptions{ServerInfo: translate.ServerInfo(c.sess.InitResult)}
}

// inputRequired builds the InputRequiredResult of c's round (see
// translate.InputRequiredResult), with the upstream's serverInfo in _meta,
// as on every result the client gets.
func (b *Bridge) inputRequired(c *call, reqs []translate.InputRequest, state string) []byte {
	res := translate.InputRequiredResult(reqs, state)
	if out, err := translate.ReshapeResult(c.method, res, b.reshapeOptions(c)); err == nil {
		return out
	}
	return res // a serverInfo that is not an object: none
}

// poolKey derives the session key of a request.
func poolKey(r Request) legacy.PoolKey {
	credential := translate.PrincipalHash(r.Header.Get("Authorization"))
	key := legacy.PoolKey{Upstream: r.Upstream, Principal: hex.EncodeToString(r.Principal[:]), Caps: translate.LegacyCapabilities(r.ClientCapabilities),
		Credential:  hex.EncodeToString(credential[:]),
		NoGetStream: r.GetStream != translate.GetStreamOn && r.Method != "subscriptions/listen"}
	switch {
	case r.Client != nil:
		key.Client = r.Client
	case r.Options != nil:
		key.Client = r.Options.Client
	}
	return key
}
