package caddymodule

import (
	"fmt"
	"log"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// Several gateway instances behind a load balancer share state_key and
// nothing else. A retry or an in-line answer for a call owned by another
// instance is forwarded to that owner (relay.go); the owner is found by the
// address sealed into its tokens (advertise) or by its id in the peer list.

// fleet is this instance's identity in the fleet, resolved at provision.
type fleet struct {
	instance string            // this instance's id
	address  string            // advertised base URL, or ""
	peers    map[string]string // other instances' ids → base URLs
	auth     *seal.ForwardAuth
	client   *http.Client  // to the other instances: peer_transport's, or newPeerClient
	errorLog *log.Logger   // httputil.ReverseProxy's, into the handler's logger
	notices  *noticeQueues // sessions given back to other instances (giveback.go)
}

// Bounds of forwarding between instances.
const (
	// forwardDialTimeout bounds connecting to an owner, so that a client
	// whose owner is gone learns it promptly.
	forwardDialTimeout = 3 * time.Second
	// maxForwardNonces bounds the nonces of forwarded requests remembered
	// against replay (for 30 s each). Beyond it, those expiring soonest
	// are forgotten and headers as old are refused (seal.ReplayFilter):
	// fresh ones pass whatever the rate.
	maxForwardNonces = 1 << 16
)

// forwardNonces is process-wide, so that a config reload does not forget
// which forwarding headers were already used.
var forwardNonces = sync.OnceValue(func() *seal.ReplayFilter {
	return seal.NewReplayFilter(maxForwardNonces)
})

// instanceIDPattern is what an instance id may be: it appears in in-line
// request ids (`gw:<id>:<n>`) and in the forwarding header.
var instanceIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// provisionFleet resolves instance_id, advertise and peers (placeholders
// expanded) and checks them. It needs the keyring.
func (h *Handler) provisionFleet() error {
	repl := caddy.NewReplacer()
	f := fleet{instance: repl.ReplaceAll(h.Fleet.InstanceID, ""), peers: make(map[string]string, len(h.Fleet.Peers))}
	if f.instance == "" {
		if h.Fleet.InstanceID != "" {
			return fmt.Errorf("instance_id %q is empty once expanded", h.Fleet.InstanceID)
		}
		f.instance = processInstance()
	} else if err := checkInstanceID(f.instance); err != nil {
		return err
	}
	if h.Fleet.Advertise != "" {
		addr, err := checkBaseURL(repl.ReplaceAll(h.Fleet.Advertise, ""))
		if err != nil {
			return fmt.Errorf("advertise: %w", err)
		}
		f.address = addr
	}
	for id, u := range h.Fleet.Peers {
		if !instanceIDPattern.MatchString(id) {
			return fmt.Errorf("peer %q: want an instance id of 1 to 64 letters, digits, '.', '_' or '-'", id)
		}
		addr, err := checkBaseURL(repl.ReplaceAll(u, ""))
		if err != nil {
			return fmt.Errorf("peer %s: %w", id, err)
		}
		if id != f.instance {
			f.peers[id] = addr
		}
	}
	if (h.Fleet.Advertise != "" || len(h.Fleet.Peers) > 0) && len(h.Fleet.StateKeys) == 0 {
		return errFleetNeedsKey
	}
	if len(h.Fleet.Peers) > 0 && h.Fleet.InstanceID == "" && h.Fleet.Advertise == "" {
		return errPeerNeedsID
	}
	signer := h.blockKeyring // a federated block's, for its servers too
	if signer == nil {
		signer = h.keyring
	}
	f.auth = seal.NewForwardAuth(signer, f.instance, forwardNonces())
	f.client = h.peerClient // peer_transport (transport.go)
	if f.client == nil {
		f.client = newPeerClient()
	}
	f.errorLog = zap.NewStdLog(h.logger.Named("relay"))
	f.notices = &noticeQueues{}
	h.fleet = f
	return nil
}

// checkInstanceID checks an instance_id once expanded.
func checkInstanceID(id string) error {
	if !instanceIDPattern.MatchString(id) {
		return fmt.Errorf("instance_id %q: want 1 to 64 letters, digits, '.', '_' or '-'", id)
	}
	return nil
}

// checkBaseURL checks an advertise or peer address and returns it without
// a trailing slash.
func checkBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "", err
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: scheme must be http or https", raw)
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("%q: no host", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return "", fmt.Errorf("%q: want only scheme://host[:port]", raw)
	case u.Path != "" && u.Path != "/":
		return "", fmt.Errorf("%q: no path, please: the client's request path is kept", raw)
	case len(raw) > seal.MaxAddressLen:
		return "", fmt.Errorf("%q: longer than %d bytes", raw, seal.MaxAddressLen)
	}
	return u.Scheme + "://" + u.Host, nil
}

// ownerAddress returns where to reach owner: the peer list first, then the
// address sealed in its token; "" when neither knows it.
func (f *fleet) ownerAddress(owner translate.Owner) string {
	if addr, ok := f.peers[owner.Instance]; ok {
		return addr
	}
	return owner.Address
}

// A session id, requestState or taskId sealed under a key this instance
// lacks is refused as any invalid one is (404 Session not found, 400
// requestState not valid, 400 unknown taskId): the client learns nothing
// more. The operator is told, at
// warn and at most once per foreignKeyEvery per kind, since it is most
// often a fleet whose instances do not share state_key, or an instance
// that restarted with no state_key. No token is logged.

// foreignKeyEvery is the least time between two such lines of one kind.
const foreignKeyEvery = 10 * time.Second

// The kinds of token told apart in the log (field "kind").
const (
	foreignSessionID    = "session_id"
	foreignRequestState = "request_state"
	foreignTaskID       = "task_id"
)

// foreignKinds name each kind in the log line and hold its limiter; they
// are process-wide, so that a reload does not reset them.
var foreignKinds = map[string]struct {
	what string
	seen *everyLimiter
}{
	foreignSessionID:    {"a session id", &everyLimiter{every: foreignKeyEvery}},
	foreignRequestState: {"a requestState", &everyLimiter{every: foreignKeyEvery}},
	foreignTaskID:       {"a taskId", &everyLimiter{every: foreignKeyEvery}},
}

// warnForeignKey logs, rate-limited, that a token of kind was sealed under
// a key this instance lacks.
func (h *Handler) warnForeignKey(kind string) {
	k := foreignKinds[kind]
	ok, skipped := k.seen.allow(time.Now())
	if !ok {
		return
	}
	h.logger.Warn(k.what+" sealed under a key this instance lacks was refused: every instance of a fleet must share state_key "+
		"(and one with no state_key opens nothing sealed before it restarted)",
		zap.String("kind", kind), zap.Int64("not_logged_since_last_line", skipped))
}

// everyLimiter allows one event per period and counts the others.
type everyLimiter struct {
	every   time.Duration
	last    atomic.Int64 // UnixNano of the last allowed event, 0 for none
	skipped atomic.Int64 // events not allowed since
}

// allow reports whether an event at now may be logged and, if so, how many
// were not since the last one that was.
func (l *everyLimiter) allow(now time.Time) (bool, int64) {
	for {
		last := l.last.Load()
		if last != 0 && now.UnixNano()-last < int64(l.every) {
			l.skipped.Add(1)
			return false, 0
		}
		if l.last.CompareAndSwap(last, now.UnixNano()) {
			return true, l.skipped.Swap(0)
		}
	}
}
