package caddymodule

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("mcp_gateway", parseCaddyfile)
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
//	    allowed_origins    <origins...>        # security
//	    allowed_hosts      <hosts...>          # security
//	    principal          <placeholder expression>  # security
//	    max_request_body   <size>              # security
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
//	    multi_turn_sse     on|off              # parking
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
//
//	    saga               on|off              # faces.saga (present: on)
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	at := parsedAt{directive: d.Token()}
	if d.NextArg() {
		return d.Errf("unexpected argument %q: put upstreams in the block (upstream <url>)", d.Val())
	}
	for d.NextBlock(0) {
		var err error
		switch opt := d.Val(); opt {
		case "upstream":
			err = h.unmarshalUpstream(d)
		case "lb_policy":
			err = unmarshalModule[reverseproxy.Selector](d, &h.SelectionPolicyRaw, "http.reverse_proxy.selection_policies", "policy", "a selection policy")
		case "transport":
			err = unmarshalModule[http.RoundTripper](d, &h.TransportRaw, "http.reverse_proxy.transport", "protocol", "a transport")
		case "peer_transport":
			err = unmarshalModule[http.RoundTripper](d, &h.Fleet.PeerTransportRaw, "http.reverse_proxy.transport", "protocol", "a transport")
		case "dynamic":
			err = unmarshalModule[reverseproxy.UpstreamSource](d, &h.DynamicUpstreamsRaw, "http.reverse_proxy.upstreams", "source", "an upstream source")
		case "dynamic_endpoint":
			err = h.unmarshalDynamicEndpoint(d)
		case "dynamic_refuse":
			if h.DynamicRefuse != nil {
				return d.Err("dynamic_refuse already specified")
			}
			h.DynamicRefuse = d.RemainingArgs()
			if len(h.DynamicRefuse) == 0 {
				return d.ArgErr()
			}
			if _, perr := parseAddrPolicy(h.DynamicRefuse); perr != nil {
				return d.Err(perr.Error())
			}
		case "max_fails":
			err = parseInt(d, &h.Health.Passive.MaxFails)
		case "unhealthy_status":
			err = h.unmarshalUnhealthyStatus(d)
		case "unhealthy_latency":
			err = parseDurationNotNegative(d, &h.Health.Passive.UnhealthyLatency, "must not be negative")
		case "health_passes":
			err = parseInt(d, &h.Health.Active.Passes)
		case "health_fails":
			err = parseInt(d, &h.Health.Active.Fails)
		case "state_key":
			if h.Fleet.StateKeys != nil {
				return d.Err("state_key already specified")
			}
			h.Fleet.StateKeys = d.RemainingArgs()
			if len(h.Fleet.StateKeys) == 0 {
				return d.Errf("state_key needs a key (an unset environment variable?): %s", makeKeyHint)
			}
			err = checkLiteralStateKeys(d, h.Fleet.StateKeys)
		case "instance_id":
			if err = parseString(d, &h.Fleet.InstanceID); err == nil {
				err = checkLiteral(d, h.Fleet.InstanceID, checkInstanceID)
			}
		case "advertise":
			at.fleetOption(d)
			if err = parseString(d, &h.Fleet.Advertise); err == nil {
				err = checkLiteral(d, h.Fleet.Advertise, func(s string) error {
					_, err := checkBaseURL(s)
					return err
				})
			}
		case "peer":
			at.fleetOption(d)
			err = h.unmarshalPeer(d)
		case "allowed_origins":
			h.Security.AllowedOrigins, err = appendArgs(d, h.Security.AllowedOrigins)
		case "allowed_hosts":
			h.Security.AllowedHosts, err = appendArgs(d, h.Security.AllowedHosts)
		case "keepalive_interval":
			err = parseDuration(d, &h.Streams.KeepAliveInterval)
		case "stream_close_delay":
			err = parseDurationNotNegative(d, &h.Streams.StreamCloseDelay, "must not be negative")
		case "fail_duration":
			err = parseDurationNotNegative(d, &h.Health.Passive.FailDuration, "must be positive")
		case "max_request_body":
			err = parseSize(d, &h.Security.MaxRequestBody)
		case "park_ttl":
			err = parseDurationNotNegative(d, &h.Parking.ParkTTL, "must be positive")
		case "gather_window":
			err = parseDuration(d, &h.Parking.GatherWindow)
		case "resume_linger":
			err = parseResumeLinger(d, &h.Parking.ResumeLinger)
		case "max_parked":
			err = parseInt(d, &h.Parking.MaxParked)
		case "max_parked_per_principal":
			err = parseInt(d, &h.Parking.MaxParkedPerPrincipal)
		case "max_rounds":
			err = parseInt(d, &h.Parking.MaxRounds)
		case "max_inputs_per_round":
			err = parseInt(d, &h.Parking.MaxInputsPerRound)
		case "max_buffered_notifications":
			err = parseInt(d, &h.Parking.MaxBufferedNotifications)
			if err == nil && h.Parking.MaxBufferedNotifications > maxBufferedNotifications {
				err = d.Errf("max_buffered_notifications: must be at most %d (each call holds a buffer this large), got %d",
					maxBufferedNotifications, h.Parking.MaxBufferedNotifications)
			}
		case "multi_turn_sse":
			err = parseOnOff(d, &h.Parking.MultiTurnSSE)
		case "max_sessions_per_principal":
			err = parseInt(d, &h.Sessions.MaxSessionsPerPrincipal)
		case "write_timeout":
			err = parseDuration(d, &h.Streams.WriteTimeout)
		case "session_lifetime":
			err = parseDurationNotNegative(d, &h.Sessions.SessionLifetime, "must be positive")
		case "max_get_streams":
			err = parseInt(d, &h.Sessions.MaxGetStreams)
		case "max_get_streams_per_principal":
			err = parseInt(d, &h.Sessions.MaxGetStreamsPerPrincipal)
		case "max_task_wait":
			err = parseDurationNotNegative(d, &h.Tasks.MaxTaskWait, "must be positive")
		case "principal":
			err = parseString(d, &h.Security.Principal)
		case "health_interval":
			err = parseDuration(d, &h.Health.Active.Interval)
		case "health_timeout":
			err = parseDurationNotNegative(d, &h.Health.Active.Timeout, "must be positive")
		case "task":
			err = h.unmarshalTask(d)
		case "task_window":
			err = parseDuration(d, &h.Tasks.Window)
		case "task_ttl":
			err = parseDurationNotNegative(d, &h.Tasks.TTL, "must be positive")
		case "task_poll_interval":
			err = parseDuration(d, &h.Tasks.PollInterval)
		case "max_tasks":
			err = parseInt(d, &h.Tasks.MaxTasks)
		case "max_tasks_per_principal":
			err = parseInt(d, &h.Tasks.MaxTasksPerPrincipal)
		case "task_store":
			if err = parseString(d, &h.Tasks.Store); err == nil {
				if cerr := checkTaskStore(h.Tasks.Store); cerr != nil {
					err = d.Err(cerr.Error())
				}
			}
		case "task_lease":
			err = parseTaskLease(d, &h.Tasks.Lease)
		case "max_task_result":
			if err = parseSize(d, &h.Tasks.MaxResult); err == nil {
				if cerr := checkMaxTaskResult(h.Tasks.MaxResult); cerr != nil {
					err = d.Err(cerr.Error())
				}
			}
		case "log_unsafe_details":
			if h.Security.LogUnsafeDetails {
				return d.Err("log_unsafe_details already specified")
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			h.Security.LogUnsafeDetails = true
		default:
			var ok bool
			if ok, err = h.unmarshalFaceOption(d, opt); !ok {
				return d.Errf("unrecognized mcp_gateway option %q", opt)
			}
		}
		if err != nil {
			return err
		}
	}
	return h.checkParsed(at)
}

func (h *Handler) unmarshalUpstream(d *caddyfile.Dispenser) error {
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
	for _, o := range h.Upstreams {
		if o.URL == u.URL {
			return d.Errf("upstream %q is listed twice", u.URL)
		}
	}
	if err := unmarshalUpstreamOptions(d, u); err != nil {
		return err
	}
	h.Upstreams = append(h.Upstreams, u)
	return nil
}

// unmarshalDynamicEndpoint reads `dynamic_endpoint <template> { ... }`.
func (h *Handler) unmarshalDynamicEndpoint(d *caddyfile.Dispenser) error {
	if h.DynamicEndpoint != nil {
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
	h.DynamicEndpoint = u
	return nil
}

// unmarshalUnhealthyStatus reads status codes (`503`) and classes (`5xx`).
func (h *Handler) unmarshalUnhealthyStatus(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	for _, a := range args {
		code, err := parseStatusArg(a)
		if err != nil {
			return d.Errf("invalid unhealthy_status %q: %v", a, err)
		}
		h.Health.Passive.UnhealthyStatus = append(h.Health.Passive.UnhealthyStatus, code)
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

func (h *Handler) unmarshalPeer(d *caddyfile.Dispenser) error {
	var id, addr string
	if !d.Args(&id, &addr) || d.NextArg() {
		return d.Err("peer takes an instance id and a base URL: peer <id> <base url>")
	}
	if _, dup := h.Fleet.Peers[id]; dup {
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
	if h.Fleet.Peers == nil {
		h.Fleet.Peers = make(map[string]string)
	}
	h.Fleet.Peers[id] = addr
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

func parseDuration(d *caddyfile.Dispenser, to *caddy.Duration) error {
	opt := d.Val()
	if *to != 0 {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	dur, err := parseDurationArg(d.Val())
	if err != nil {
		return d.Errf("invalid %s %q: %v", opt, d.Val(), err)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	*to = caddy.Duration(dur)
	return nil
}

// parseDurationArg parses a duration such as `15s` or `-1s`; a bare
// negative whole number such as `-1` is accepted too and means off, as in
// reverse_proxy's `flush_interval -1`.
func parseDurationArg(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n < 0 {
		return time.Duration(n), nil
	}
	return caddy.ParseDuration(s)
}

func parseSize(d *caddyfile.Dispenser, to *int64) error {
	opt := d.Val()
	if *to != 0 {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := humanize.ParseBytes(d.Val())
	if err != nil || n > 1<<40 {
		return d.Errf("invalid %s %q: want a size such as 4MiB", opt, d.Val())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	*to = int64(n)
	return nil
}

func parseInt(d *caddyfile.Dispenser, to *int) error {
	opt := d.Val()
	if *to != 0 {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return d.Errf("invalid %s %q: want a positive whole number", opt, d.Val())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	*to = n
	return nil
}

func parseString(d *caddyfile.Dispenser, to *string) error {
	opt := d.Val()
	if *to != "" {
		return d.Errf("%s already specified", opt)
	}
	if !d.NextArg() {
		return d.ArgErr()
	}
	*to = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Handler)(nil)
