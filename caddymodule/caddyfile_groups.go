package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/caddymodule/face"
)

// One Caddyfile helper per config group: each parses the group's options
// (their flat Caddyfile names) into it, or reports false for an option
// that is not its own. UnmarshalCaddyfile asks the handler, then each
// group, then the faces.

func (c *HealthChecks) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "health_interval":
		err = face.ParseDuration(d, &c.Active.Interval)
	case "health_timeout":
		err = face.ParseDurationNotNegative(d, &c.Active.Timeout, "must be positive")
	case "health_passes":
		err = face.ParseCount(d, &c.Active.Passes)
	case "health_fails":
		err = face.ParseCount(d, &c.Active.Fails)
	case "fail_duration":
		err = face.ParseDurationNotNegative(d, &c.Passive.FailDuration, "must be positive")
	case "max_fails":
		err = face.ParseCount(d, &c.Passive.MaxFails)
	case "unhealthy_status":
		err = c.Passive.unmarshalUnhealthyStatus(d)
	case "unhealthy_latency":
		err = face.ParseDurationNotNegative(d, &c.Passive.UnhealthyLatency, "must not be negative")
	default:
		return false, nil
	}
	return true, err
}

func (c *FleetConfig) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "state_key":
		if c.StateKeys != nil {
			return true, d.Err("state_key already specified")
		}
		c.StateKeys = d.RemainingArgs()
		if len(c.StateKeys) == 0 {
			return true, d.Errf("state_key needs a key (an unset environment variable?): %s", makeKeyHint)
		}
		err = checkLiteralStateKeys(d, c.StateKeys)
	case "instance_id":
		if err = face.ParseString(d, &c.InstanceID); err == nil {
			err = checkLiteral(d, c.InstanceID, checkInstanceID)
		}
	case "advertise":
		if err = face.ParseString(d, &c.Advertise); err == nil {
			err = checkLiteral(d, c.Advertise, func(s string) error {
				_, err := checkBaseURL(s)
				return err
			})
		}
	case "peer":
		err = c.unmarshalPeer(d)
	case "peer_transport":
		err = unmarshalModule[http.RoundTripper](d, &c.PeerTransportRaw, "http.reverse_proxy.transport", "protocol", "a transport")
	default:
		return false, nil
	}
	return true, err
}

func (c *SecurityConfig) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "allowed_origins":
		c.AllowedOrigins, err = appendArgs(d, c.AllowedOrigins)
	case "allowed_hosts":
		c.AllowedHosts, err = appendArgs(d, c.AllowedHosts)
	case "principal":
		err = face.ParseString(d, &c.Principal)
	case "max_request_body":
		err = face.ParseSize(d, &c.MaxRequestBody)
	case "accept_client_quirks":
		if c.AcceptClientQuirks, err = appendArgs(d, c.AcceptClientQuirks); err == nil {
			if cerr := checkClientQuirks(c.AcceptClientQuirks); cerr != nil {
				err = d.Err(cerr.Error())
			}
		}
	case "log_unsafe_details":
		if c.LogUnsafeDetails {
			return true, d.Err("log_unsafe_details already specified")
		}
		if d.NextArg() {
			return true, d.ArgErr()
		}
		c.LogUnsafeDetails = true
	default:
		return false, nil
	}
	return true, err
}

func (c *StreamsConfig) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "keepalive_interval":
		err = face.ParseDuration(d, &c.KeepAliveInterval)
	case "stream_close_delay":
		err = face.ParseDurationNotNegative(d, &c.StreamCloseDelay, "must not be negative")
	case "write_timeout":
		err = face.ParseDuration(d, &c.WriteTimeout)
	default:
		return false, nil
	}
	return true, err
}

func (c *ParkingConfig) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "park_ttl":
		err = face.ParseDurationNotNegative(d, &c.ParkTTL, "must be positive")
	case "gather_window":
		err = face.ParseDuration(d, &c.GatherWindow)
	case "resume_linger":
		err = parseResumeLinger(d, &c.ResumeLinger)
	case "max_parked":
		err = face.ParseCount(d, &c.MaxParked)
	case "max_parked_per_principal":
		err = face.ParseCount(d, &c.MaxParkedPerPrincipal)
	case "max_rounds":
		err = face.ParseCount(d, &c.MaxRounds)
	case "max_inputs_per_round":
		err = face.ParseCount(d, &c.MaxInputsPerRound)
	case "max_buffered_notifications":
		err = face.ParseCount(d, &c.MaxBufferedNotifications)
		if err == nil && c.MaxBufferedNotifications > maxBufferedNotifications {
			err = d.Errf("max_buffered_notifications: must be at most %d (each call holds a buffer this large), got %d",
				maxBufferedNotifications, c.MaxBufferedNotifications)
		}
	default:
		return false, nil
	}
	return true, err
}

func (c *SessionsConfig) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "max_sessions_per_principal":
		err = face.ParseCount(d, &c.MaxSessionsPerPrincipal)
	case "session_lifetime":
		err = face.ParseDurationNotNegative(d, &c.SessionLifetime, "must be positive")
	case "max_get_streams":
		err = face.ParseCount(d, &c.MaxGetStreams)
	case "max_get_streams_per_principal":
		err = face.ParseCount(d, &c.MaxGetStreamsPerPrincipal)
	default:
		return false, nil
	}
	return true, err
}

func (c *TasksConfig) unmarshalOption(d *caddyfile.Dispenser, opt string) (bool, error) {
	var err error
	switch opt {
	case "task":
		err = c.unmarshalTask(d)
	case "task_window":
		err = face.ParseDuration(d, &c.Window)
	case "task_ttl":
		err = face.ParseDurationNotNegative(d, &c.TTL, "must be positive")
	case "task_poll_interval":
		err = face.ParseDuration(d, &c.PollInterval)
	case "max_tasks":
		err = face.ParseCount(d, &c.MaxTasks)
	case "max_tasks_per_principal":
		err = face.ParseCount(d, &c.MaxTasksPerPrincipal)
	case "task_store":
		if err = face.ParseString(d, &c.Store); err == nil {
			if cerr := checkTaskStore(c.Store); cerr != nil {
				err = d.Err(cerr.Error())
			}
		}
	case "task_lease":
		err = parseTaskLease(d, &c.Lease)
	case "max_task_result":
		if err = face.ParseSize(d, &c.MaxResult); err == nil {
			if cerr := checkMaxTaskResult(c.MaxResult); cerr != nil {
				err = d.Err(cerr.Error())
			}
		}
	case "max_task_wait":
		err = face.ParseDurationNotNegative(d, &c.MaxTaskWait, "must be positive")
	case "task_listen_poll":
		err = face.ParseDurationNotNegative(d, &c.ListenPoll, "must be positive")
	case "max_listen_task_ids":
		err = face.ParseCount(d, &c.MaxListenTaskIDs)
	case "max_task_listeners_per_principal":
		err = face.ParseCount(d, &c.MaxTaskListenersPerPrincipal)
	default:
		return false, nil
	}
	return true, err
}
