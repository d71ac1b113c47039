package forward

import (
	"context"
	"sync"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// Which tools of a server with 2025 tasks may run as its own tasks: the
// bridge learns a tool's execution.taskSupport from the server's tools/list
// (taskSupport in task_policy.go); a client need not list the tools first,
// so a tools/call for a tool not learned yet lists them itself.

// toolLister remembers when the bridge last listed an upstream's tools
// itself for a principal (learnToolTasks), so that a tool the list does
// not name costs one listing per relistAfter at most. A listing is the
// principal's own (taskSupport): another principal's does not count.
type toolLister struct {
	mu sync.Mutex
	at map[supportKey]time.Time // (upstream, principal) -> last listing
}

// Bounds of toolLister.
const (
	relistAfter        = time.Minute
	maxListedUpstreams = 4096 // (upstream, principal) pairs
)

// due reports whether upstream's tools may be listed now for principal,
// and if so records the listing.
func (l *toolLister) due(upstream string, principal [16]byte) bool {
	k := supportKey{upstream, principal}
	l.mu.Lock()
	defer l.mu.Unlock()
	if at, ok := l.at[k]; ok && time.Since(at) < relistAfter {
		return false
	}
	if l.at == nil || len(l.at) >= maxListedUpstreams {
		l.at = make(map[supportKey]time.Time)
	}
	l.at[k] = time.Now()
	return true
}

// learnToolTasks lets a tools/call to an upstream with 2025 tasks (sess's)
// find its tool's execution.taskSupport when no rule names the tool and
// no tools/list through the bridge said it yet (a client need not list the
// tools first): it lists the tools on sess (the first page). A tool that
// may then become a task gets its rule as mayBecomeTask gives it
// (applyTaskRule): r.hosting set and a task place taken when the request
// declares the extension (Serve frees it if the call does not start),
// -32021 for a required tool when it does not.
func (b *Bridge) learnToolTasks(ctx context.Context, r *Request, sess *legacy.Session) *jsonrpc.RPCError {
	if r.hosting != nil || r.Method != "tools/call" || !upstreamHasTasks(sess.InitResult) {
		return nil
	}
	p := &r.Options.Tasks.Policy
	if _, named := p.Tools[r.Name]; named || p.Default != nil {
		return nil
	}
	if _, known := b.support.mode(r.Upstream, r.Principal, r.Name); known || !b.lister.due(r.Upstream, r.Principal) {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, upstreamTaskTimeout)
	defer cancel()
	call, err := sess.Call(lctx, "tools/list", nil)
	if err != nil {
		return nil // the call itself will tell
	}
	m, err := call.Final()
	call.Close()
	if err != nil {
		return nil
	}
	b.support.learn(r.Upstream, r.Principal, translate.ResultOf(m.Raw))
	hosting, rerr := b.applyTaskRule(*r, b.support.taskRule(p, r.Upstream, r.Principal, r.Name))
	if rerr != nil {
		return rerr
	}
	r.hosting = hosting
	return nil
}
