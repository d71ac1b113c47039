package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

func init() {
	httpcaddyfile.RegisterDirective("mcp_gateway", parseDirective) // caddyfile_matcher.go
	// Before reverse_proxy, so that `mcp_gateway` needs no `order` option
	// and wins over a catch-all proxy in the same site.
	httpcaddyfile.RegisterDirectiveOrder("mcp_gateway", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Each
// option sets one config field: the one whose JSON key has the option's
// name, in the group noted on the right (with the key, where it differs).
// What an option means is its field's doc comment (docs/json.md). Syntax:
//
//	mcp_gateway [<matcher>] {
//	    upstream <url> {                       # upstreams; repeatable; at least one (or dynamic)
//	        era        auto|legacy|modern
//	        gather     learn|always
//	        get_stream learn|on|off
//	        tasks      on|off
//	        resume     on|off
//	    }
//	    dynamic <source> [<args...>] { <source options...> }       # dynamic_upstreams
//	    dynamic_endpoint <http|https>:///<path> { <upstream options...> }
//	    dynamic_refuse   <loopback|link_local|metadata|unspecified|private|<cidr>|<ip>...>|none
//	    lb_policy        <name> [<options...>]                      # selection_policy
//	    transport        <name> { <options...> }
//
//	    server <name> {                        # servers; repeatable; instead of the upstream options above
//	        upstream <url> { ... }             # and dynamic, dynamic_endpoint, dynamic_refuse,
//	        ...                                # lb_policy, transport: as above, for this server
//	        prefix <prefix>                    # "" for none
//	        tools  include|exclude <glob...>   # tools.include, tools.exclude; repeatable
//	    }
//	    list_timeout       <duration>          # federation; with server blocks only
//
//	    health_interval    <duration>          # health.active.interval; -1: off
//	    health_timeout     <duration>          # health.active.timeout
//	    health_passes      <count>             # health.active.passes
//	    health_fails       <count>             # health.active.fails
//	    fail_duration      <duration>          # health.passive
//	    max_fails          <count>             # health.passive
//	    unhealthy_status   <status|class (5xx)...>   # health.passive
//	    unhealthy_latency  <duration>          # health.passive
//
//	    state_key          <base64 32 bytes> [<older keys...>]  # fleet.state_keys
//	    instance_id        <id>                # fleet
//	    advertise          <base url>          # fleet
//	    peer               <id> <base url>     # fleet.peers; repeatable
//	    peer_transport     <name> { <options...> }   # fleet
//
//	    auth {                                 # auth
//	        issuer         <url>
//	        audience       <url>
//	        require_scope  <scopes...>
//	    }
//
//	    allowed_origins    <origins...>        # security
//	    allowed_hosts      <hosts...>          # security
//	    principal          <placeholder expression>  # security
//	    max_request_body   <size>              # security
//	    accept_client_quirks <repairs...>      # security; protocol_header_mismatch, missing_method_header
//	    log_unsafe_details                     # security; UNSAFE: secrets in debug logs
//
//	    keepalive_interval <duration>          # streams; -1: off
//	    stream_close_delay <duration>          # streams
//	    write_timeout      <duration>          # streams; -1: off
//
//	    park_ttl           <duration>          # parking
//	    max_parked         <count>             # parking
//	    max_parked_per_principal <count>       # parking
//	    gather_window      <duration>          # parking; -1: off
//	    resume_linger      <duration>          # parking; -1: off
//	    max_rounds         <count>             # parking
//	    max_inputs_per_round <count>           # parking
//	    max_buffered_notifications <count>     # parking
//
//	    max_sessions_per_principal <count>     # sessions
//	    session_lifetime   <duration>          # sessions
//	    max_get_streams    <count>             # sessions
//	    max_get_streams_per_principal <count>  # sessions
//
//	    task <tool>|* forbidden|optional|required [<window>]   # tasks.rules; repeatable
//	    task_window        <duration>          # tasks
//	    task_ttl           <duration>          # tasks
//	    task_poll_interval <duration>          # tasks; -1: none
//	    max_tasks          <count>             # tasks
//	    max_tasks_per_principal <count>        # tasks
//	    task_store         storage|off         # tasks.store
//	    task_lease         <duration>          # tasks.lease
//	    max_task_result    <size>              # tasks.max_result
//	    max_task_wait      <duration>          # tasks
//
//	    rest               <base path>         # rest.base_path
//	    rest_wait          <duration>          # rest.wait
//	    rest_call_ttl      <duration>          # rest.call_ttl
//	    rest_max_calls_per_principal <count>   # rest.max_calls_per_principal
//	    rest_max_records_per_principal <count> # rest.max_records_per_principal
//	    rest_max_bytes_per_principal <size>    # rest.max_bytes_per_principal
//	    rest_max_records   <count>             # rest.max_records
//	    rest_max_bytes     <size>              # rest.max_bytes
//
//	    saga               on|off              # faces.saga (present: on)
//	    multi_turn_sse     on|off              # faces.multi_turn_sse (present: on)
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	at := parsedAt{directive: d.Token()}
	if d.NextArg() {
		return d.Errf("unexpected argument %q: put upstreams in the block (upstream <url>)", d.Val())
	}
	for d.NextBlock(0) {
		opt := d.Val()
		ok, err := h.unmarshalOption(d, opt, &at)
		groups := []func(*caddyfile.Dispenser, string) (bool, error){
			h.Health.unmarshalOption, h.Fleet.unmarshalOption, h.Security.unmarshalOption, h.Streams.unmarshalOption,
			h.Parking.unmarshalOption, h.Sessions.unmarshalOption, h.Tasks.unmarshalOption, h.unmarshalFaceOption,
		}
		for i := 0; !ok && i < len(groups); i++ {
			ok, err = groups[i](d, opt)
		}
		if !ok {
			return d.Errf("unrecognized mcp_gateway option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return h.checkParsed(at)
}

// unmarshalOption parses the options of the handler's own fields (its
// upstreams and how they are chosen and reached, or its servers), or
// reports false.
func (h *Handler) unmarshalOption(d *caddyfile.Dispenser, opt string, at *parsedAt) (bool, error) {
	switch opt {
	case "server":
		return true, h.unmarshalServer(d, at)
	case "auth":
		if h.Auth != nil {
			return true, d.Err("auth already specified")
		}
		h.Auth = new(AuthConfig)
		return true, h.Auth.unmarshalCaddyfile(d)
	case "upstream_auth":
		return true, unmarshalUpstreamAuth(d, &h.UpstreamAuth) // the servers' default too
	case "list_timeout":
		markFirst(&at.listTimeout, d.Token())
		return true, face.ParseDurationNotNegative(d, &h.Federation.ListTimeout, "must not be negative")
	case "advertise", "peer":
		markFirst(&at.fleet, d.Token()) // then the fleet group parses it
		return false, nil
	}
	tok := d.Token()
	ok, err := h.upstreamFields().unmarshalOption(d, opt)
	if ok {
		markFirst(&at.upstream, tok)
	}
	return ok, err
}

// upstreamFields are the fields the upstream options fill: a block's own
// (Handler) or a server's (Server), which have the same options.
type upstreamFields struct {
	upstreams       *[]*Upstream
	dynamic         *json.RawMessage
	dynamicEndpoint **Upstream
	dynamicRefuse   *[]string
	selectionPolicy *json.RawMessage
	transport       *json.RawMessage
}

func (h *Handler) upstreamFields() upstreamFields {
	return upstreamFields{&h.Upstreams, &h.DynamicUpstreamsRaw, &h.DynamicEndpoint, &h.DynamicRefuse, &h.SelectionPolicyRaw, &h.TransportRaw}
}

func (s *Server) upstreamFields() upstreamFields {
	return upstreamFields{&s.Upstreams, &s.DynamicUpstreamsRaw, &s.DynamicEndpoint, &s.DynamicRefuse, &s.SelectionPolicyRaw, &s.TransportRaw}
}

// unmarshalOption parses an upstream option (upstream, lb_policy,
// transport, dynamic, dynamic_endpoint, dynamic_refuse) into f, or
// reports false.
func (f upstreamFields) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "upstream":
		err = f.unmarshalUpstream(d)
	case "lb_policy":
		err = unmarshalModule[reverseproxy.Selector](d, f.selectionPolicy, "http.reverse_proxy.selection_policies", "policy", "a selection policy")
	case "transport":
		err = unmarshalModule[http.RoundTripper](d, f.transport, "http.reverse_proxy.transport", "protocol", "a transport")
	case "dynamic":
		err = unmarshalModule[reverseproxy.UpstreamSource](d, f.dynamic, "http.reverse_proxy.upstreams", "source", "an upstream source")
	case "dynamic_endpoint":
		err = f.unmarshalDynamicEndpoint(d)
	case "dynamic_refuse":
		if *f.dynamicRefuse != nil {
			return true, d.Err("dynamic_refuse already specified")
		}
		*f.dynamicRefuse = d.RemainingArgs()
		if len(*f.dynamicRefuse) == 0 {
			return true, d.ArgErr()
		}
		if _, perr := parseAddrPolicy(*f.dynamicRefuse); perr != nil {
			return true, d.Err(perr.Error())
		}
	default:
		return false, nil
	}
	return true, err
}

func (f upstreamFields) unmarshalUpstream(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.Err("upstream needs a URL")
	}
	u := &Upstream{URL: d.Val()}
	if d.NextArg() {
		return d.Errf("upstream takes one URL; options go in its block, got %q", d.Val())
	}
	if err := u.checkURL(); err != nil {
		return d.Err(err.Error())
	}
	for _, o := range *f.upstreams {
		if o.URL == u.URL {
			return d.Errf("upstream %q is listed twice", u.URL)
		}
	}
	if err := unmarshalUpstreamOptions(d, u); err != nil {
		return err
	}
	*f.upstreams = append(*f.upstreams, u)
	return nil
}

// unmarshalDynamicEndpoint reads `dynamic_endpoint <template> { ... }`.
func (f upstreamFields) unmarshalDynamicEndpoint(d *caddyfile.Dispenser) error {
	if *f.dynamicEndpoint != nil {
		return d.Err("dynamic_endpoint already specified")
	}
	if !d.NextArg() {
		return d.Err("dynamic_endpoint needs a URL template such as http:///mcp")
	}
	u := &Upstream{URL: d.Val()}
	if d.NextArg() {
		return d.Errf("dynamic_endpoint takes one URL template; options go in its block, got %q", d.Val())
	}
	if _, err := checkEndpointTemplate(u.URL); err != nil {
		return d.Err(err.Error())
	}
	if err := unmarshalUpstreamOptions(d, u); err != nil {
		return err
	}
	*f.dynamicEndpoint = u
	return nil
}

// unmarshalUnhealthyStatus reads status codes (`503`) and classes (`5xx`).
func (c *PassiveHealthChecks) unmarshalUnhealthyStatus(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	for _, a := range args {
		code, err := parseStatusArg(a)
		if err != nil {
			return d.Errf("invalid unhealthy_status %q: %v", a, err)
		}
		c.UnhealthyStatus = append(c.UnhealthyStatus, code)
	}
	return nil
}

// parseStatusArg parses an HTTP status (`503`) or a class (`5xx`, which
// is 5, as reverse_proxy stores it).
func parseStatusArg(s string) (int, error) {
	if len(s) == 3 && s[1:] == "xx" && s[0] >= '1' && s[0] <= '5' {
		return int(s[0] - '0'), nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 || n > 599 {
		return 0, errors.New("want a status such as 503 or a class such as 5xx")
	}
	return n, nil
}

// unmarshalUpstreamOptions reads the block of an upstream or of
// dynamic_endpoint into u.
func unmarshalUpstreamOptions(d *caddyfile.Dispenser, u *Upstream) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		var field *string
		var check func(string) error
		switch opt {
		case "era":
			field, check = &u.Era, checkEra
		case "gather":
			field, check = &u.Gather, checkGather
		case "get_stream":
			field, check = &u.GetStream, checkGetStream
		case "resume":
			field = &u.Resume
		case "tasks":
			field = &u.Tasks
		default:
			return d.Errf("unrecognized upstream option %q", opt)
		}
		if check == nil {
			check = func(v string) error { return checkOnOff(opt, v) }
		}
		if *field != "" {
			return d.Errf("%s already specified", opt)
		}
		if !d.NextArg() {
			return d.ArgErr()
		}
		*field = d.Val()
		if err := check(*field); err != nil {
			return d.Err(err.Error())
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

func (c *FleetConfig) unmarshalPeer(d *caddyfile.Dispenser) error {
	var id, addr string
	if !d.Args(&id, &addr) || d.NextArg() {
		return d.Err("peer takes an instance id and a base URL: peer <id> <base url>")
	}
	if _, dup := c.Peers[id]; dup {
		return d.Errf("peer %q listed twice", id)
	}
	if !instanceIDPattern.MatchString(id) {
		return d.Errf("peer %q: want an instance id of 1 to 64 letters, digits, '.', '_' or '-'", id)
	}
	if err := checkLiteral(d, addr, func(s string) error {
		_, err := checkBaseURL(s)
		return err
	}); err != nil {
		return d.Errf("peer %s: %v", id, err)
	}
	if c.Peers == nil {
		c.Peers = make(map[string]string)
	}
	c.Peers[id] = addr
	return nil
}

// unmarshalModule reads `<option> <name> [{ … }]` (`lb_policy`,
// `transport`, `peer_transport`, `dynamic`): the module name of namespace,
// with its own Caddyfile syntax, which must be a T (what, in errors), into
// *raw with inlineKey naming it, as reverse_proxy's options of the same
// names. An option may be given once.
func unmarshalModule[T any](d *caddyfile.Dispenser, raw *json.RawMessage, namespace, inlineKey, what string) error {
	opt := d.Val()
	if !d.NextArg() {
		return d.ArgErr()
	}
	if *raw != nil {
		return d.Errf("%s already specified", opt)
	}
	name := d.Val()
	unm, err := caddyfile.UnmarshalModule(d, namespace+"."+name)
	if err != nil {
		return err
	}
	mod, ok := unm.(T)
	if !ok {
		return d.Errf("%s %s is not %s", opt, name, what)
	}
	*raw = caddyconfig.JSONModuleObject(mod, inlineKey, name, nil)
	return nil
}

func appendArgs(d *caddyfile.Dispenser, to []string) ([]string, error) {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return nil, d.ArgErr()
	}
	return append(to, args...), nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)

// The checks here are made while the Caddyfile is parsed, so that their
// errors carry its file and line. Provision and Validate make them again
// for JSON configurations, whose errors cannot.

// parsedAt remembers where options that are checked against each other
// at the end of the block were written.
type parsedAt struct {
	directive   caddyfile.Token   // mcp_gateway
	fleet       caddyfile.Token   // the first advertise or peer
	upstream    caddyfile.Token   // the first of the block's own upstream options
	listTimeout caddyfile.Token   // list_timeout
	servers     []caddyfile.Token // each server, in order
}

// markFirst remembers tok in *at, unless one is there already.
func markFirst(at *caddyfile.Token, tok caddyfile.Token) {
	if at.Text == "" {
		*at = tok
	}
}

// errAt returns msg as a Caddyfile error at tok's file and line.
func errAt(tok caddyfile.Token, msg string) error {
	d := caddyfile.NewDispenser([]caddyfile.Token{tok})
	d.Next()
	return d.Err(msg)
}

// checkParsed checks, once the block is read, what needs more than one
// option: at least one upstream (or server), what the servers need
// (servers_check.go), and what advertise and peer need.
func (h *Handler) checkParsed(at parsedAt) error {
	if err := h.checkParsedServers(at); err != nil {
		return err
	}
	if len(h.Servers) == 0 && len(h.Upstreams) == 0 && h.DynamicUpstreamsRaw == nil {
		return errAt(at.directive, errNoUpstream.Error())
	}
	if at.fleet.Text == "" {
		return nil
	}
	if len(h.Fleet.StateKeys) == 0 {
		return errAt(at.fleet, errFleetNeedsKey.Error())
	}
	if len(h.Fleet.Peers) > 0 && h.Fleet.InstanceID == "" && h.Fleet.Advertise == "" {
		return errAt(at.fleet, errPeerNeedsID.Error())
	}
	return nil
}

// Errors of options that need others, shared by the Caddyfile and
// Provision/Validate.
var (
	errNoUpstream    = errors.New("at least one upstream (or a dynamic upstream source) is required")
	errFleetNeedsKey = errors.New("advertise and peer need state_key, shared by every instance: " +
		"with a key made at start, no other instance can open this one's tokens")
	errPeerNeedsID = errors.New("peer needs instance_id (or advertise) on this instance: " +
		"with a random id, the other instances cannot list this one")
)

// checkLiteralStateKeys checks the state keys written as they are; one
// holding a placeholder ({env.MCP_GATEWAY_KEY}) is checked at provision,
// once expanded.
func checkLiteralStateKeys(d *caddyfile.Dispenser, keys []string) error {
	for i, k := range keys {
		if strings.Contains(k, "{") {
			continue
		}
		if _, err := parseStateKey(i+1, k); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}

// checkLiteral checks a value written as it is with check; one holding a
// placeholder is checked at provision, once expanded.
func checkLiteral(d *caddyfile.Dispenser, s string, check func(string) error) error {
	if strings.Contains(s, "{") {
		return nil
	}
	if err := check(s); err != nil {
		return d.Err(err.Error())
	}
	return nil
}

// parseResumeLinger parses resume_linger, which is bounded.
func parseResumeLinger(d *caddyfile.Dispenser, to *caddy.Duration) error {
	if err := face.ParseDuration(d, to); err != nil {
		return err
	}
	if time.Duration(*to) > forward.MaxResumeLinger {
		return d.Errf("resume_linger: must be at most %v, got %v", forward.MaxResumeLinger, time.Duration(*to))
	}
	return nil
}

// parseTaskLease parses task_lease, which is bounded below (0 leaves the
// default).
func parseTaskLease(d *caddyfile.Dispenser, to *caddy.Duration) error {
	if err := face.ParseDuration(d, to); err != nil {
		return err
	}
	if *to != 0 {
		if err := checkTaskLease(*to); err != nil {
			return d.Err(err.Error())
		}
	}
	return nil
}
