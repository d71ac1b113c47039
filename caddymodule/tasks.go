package caddymodule

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TaskPolicy is one `task` rule: whether a tool's calls may become tasks
// the gateway hosts (in front of a legacy server, for a modern client that
// declares the Tasks extension), and after how long.
type TaskPolicy struct {
	// The tool's name, or `*` for every tool no other rule names.
	Tool string `json:"tool"`

	// `forbidden`: the call always runs synchronously (input rounds as
	// usual). `optional`: a request declaring the Tasks extension is held
	// up to `window`; a call that ends by then answers plainly, one that
	// asks for input by then gets an ordinary `input_required` round, and
	// otherwise the client gets a task (`resultType: "task"`) to poll;
	// without the extension the call runs synchronously. `required`: as
	// `optional`, except that a call that ends within the window answers
	// with a task already completed, and a request without the extension
	// is refused with `-32021` (data `requiredCapabilities`) before
	// anything reaches the upstream.
	Mode string `json:"mode"`

	// How long the gateway holds a call before it turns it into a task. Zero
	// makes the task at once, before the tool asks anything. Default:
	// `task_window`.
	Window *caddy.Duration `json:"window,omitempty"`
}

// unmarshalTask parses `task <tool> <mode> [<window>]`.
func (c *TasksConfig) unmarshalTask(d *caddyfile.Dispenser) error {
	var p TaskPolicy
	if !d.Args(&p.Tool, &p.Mode) {
		return d.Err("task needs a tool name (or *) and forbidden, optional or required")
	}
	if _, err := forward.ParseTaskMode(p.Mode); err != nil {
		return d.Err(err.Error())
	}
	if d.NextArg() {
		w, err := caddy.ParseDuration(d.Val())
		if err != nil || w < 0 {
			return d.Errf("invalid task window %q: want a duration such as 200ms (0: a task at once)", d.Val())
		}
		cw := caddy.Duration(w)
		p.Window = &cw
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for _, q := range c.Rules {
		if q.Tool == p.Tool {
			return d.Errf("task %s already specified", p.Tool)
		}
	}
	c.Rules = append(c.Rules, &p)
	return nil
}

// checkTasks validates the task rules.
func checkTasks(rules []*TaskPolicy) error {
	seen := map[string]bool{}
	for _, p := range rules {
		if p == nil || p.Tool == "" {
			return fmt.Errorf("tasks: a rule needs a tool name (or *)")
		}
		if seen[p.Tool] {
			return fmt.Errorf("tasks: tool %q has two rules", p.Tool)
		}
		seen[p.Tool] = true
		if _, err := forward.ParseTaskMode(p.Mode); err != nil {
			return fmt.Errorf("tasks: tool %q: %w", p.Tool, err)
		}
		if p.Window != nil && *p.Window < 0 {
			return fmt.Errorf("tasks: tool %q: the window must not be negative", p.Tool)
		}
	}
	return nil
}

// taskPolicy is the bridge's form of the rules.
func (h *Handler) taskPolicy() forward.TaskPolicy {
	out := forward.TaskPolicy{Tools: map[string]forward.TaskRule{}, DefaultWindow: orOff(h.Tasks.Window)}
	for _, p := range h.Tasks.Rules {
		mode, _ := forward.ParseTaskMode(p.Mode) // checked by Validate
		rule := forward.TaskRule{Mode: mode, Window: out.DefaultWindow}
		if p.Window != nil {
			rule.Window = time.Duration(*p.Window)
		}
		if p.Tool == "*" {
			out.Default = &rule
		} else {
			out.Tools[p.Tool] = rule
		}
	}
	return out
}

// The values of task_store (tasks.store).
const (
	taskStoreStorage = "storage" // Caddy's configured storage (the default)
	taskStoreOff     = "off"     // tasks in their instance's memory only
)

// Bounds of task_lease and max_task_result. The lease is renewed every
// third of it: a shorter one would write to the storage all the time. A
// task record holds at most seal.MaxRecordPayload of result.
const (
	minTaskLease     = time.Second
	maxMaxTaskResult = seal.MaxRecordPayload
)

// checkTaskStore checks a task_store value ("" is the default).
func checkTaskStore(v string) error {
	switch v {
	case "", taskStoreStorage, taskStoreOff:
		return nil
	}
	return fmt.Errorf("task_store: unknown value %q (want storage or off)", v)
}

// checkTaskLease checks a task_lease.
func checkTaskLease(d caddy.Duration) error {
	if time.Duration(d) < minTaskLease {
		return fmt.Errorf("task_lease: must be at least %v, got %v", minTaskLease, time.Duration(d))
	}
	return nil
}

// checkMaxTaskResult checks a max_task_result's upper bound (Validate
// checks the lower one with the other counts).
func checkMaxTaskResult(n int64) error {
	if n > maxMaxTaskResult {
		return fmt.Errorf("max_task_result: must be at most %d (%dMiB, what a task record holds), got %d", maxMaxTaskResult, maxMaxTaskResult>>20, n)
	}
	return nil
}

// provisionTaskStore takes Caddy's configured storage for the task
// records (task_store storage, the default), or none (task_store off).
func (h *Handler) provisionTaskStore(ctx caddy.Context) error {
	if err := checkTaskStore(h.Tasks.Store); err != nil {
		return err
	}
	h.taskStorage = nil
	if h.Tasks.Store == taskStoreStorage && len(h.Fleet.StateKeys) == 0 {
		return fmt.Errorf("task_store storage needs state_key: records sealed with the random key made at start can be read by no other instance, nor by this one after a restart")
	}
	if h.Tasks.Store != taskStoreOff {
		h.taskStorage = ctx.Storage()
	}
	return nil
}
