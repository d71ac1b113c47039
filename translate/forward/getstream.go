package forward

import (
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// When a session leased for a call opens its standalone GET stream
// (translate.GetStreamLearn, the default).
//
// A legacy server may send a call's questions on the call's own stream
// (servers built on the go-sdk's req.Session, the TypeScript SDK's
// extra.sendRequest, the Python SDK's ctx.elicit) or on the session's
// standalone GET stream (a TypeScript server calling server.elicitInput
// without a related request). Keeping a GET stream open on every session is
// what a legacy client does, but in front of a resumable server it costs a
// new connection and a GET per call: a call that parks holding nothing
// closes its session's stream (Session.Detach), and the session, back in
// the pool, would open it again for the next call — measured, 17 % of the
// parking instance's CPU in a fleet and a quarter of its throughput.
//
// So the bridge learns, per target (upstream, method, tool or prompt name
// or resource URI: the gather policy's), where its questions come:
//
//   - a target not seen asking yet has its session listen (Session.Listen,
//     before the call is sent), as with get_stream on;
//   - a target that asked on its call's own stream, and never on the GET
//     stream, does not: its sessions open none, and one it leases that
//     still has one keeps it;
//   - a target that asked on the GET stream once listens for good.
//
// A server whose tool asks on its own stream at first and on the GET stream
// on a later call would leave that later call waiting; get_stream on is for
// such a server. (In front of a resumable server such a tool already fails
// after its first park: a stream reopened elsewhere replays the call's
// stream, not the session's.)

// maxStreamTargets bounds the targets remembered; the least recently used
// is forgotten (its next call listens, and teaches the bridge again).
const maxStreamTargets = 4096

// listenWait bounds how long a call waits for the upstream to answer the
// GET stream it opens before the call is sent.
const listenWait = time.Second

// streamPolicy remembers, per target, whether its questions came only on
// its calls' own streams (true) or also on the session's GET stream
// (false, for good). Safe for concurrent use.
type streamPolicy struct {
	ownStream *lru.Cache[uint64, bool]
}

func newStreamPolicy() *streamPolicy {
	own, err := lru.New[uint64, bool](maxStreamTargets)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &streamPolicy{ownStream: own}
}

// listens reports whether the session of c, a call with r's target, needs
// its GET stream.
func (b *Bridge) listens(c *call, mode translate.GetStream) bool {
	if mode != translate.GetStreamLearn {
		return false // on: opened with the session; off: never
	}
	own, known := b.streams.ownStream.Get(b.gather.target(c))
	return !known || !own
}

// learnStream records where a question of c's target came: on the
// session's GET stream (inbox: for good), or on the call's own stream
// (unless it came on the GET stream before).
func (b *Bridge) learnStream(c *call, inbox bool) {
	if inbox {
		b.streams.ownStream.Add(b.gather.target(c), false)
		return
	}
	b.streams.ownStream.ContainsOrAdd(b.gather.target(c), true)
}
