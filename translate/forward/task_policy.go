package forward

import (
	"fmt"
	"time"

	"github.com/tidwall/gjson"
)

// ExtTasks is the name of the Tasks extension (SEP-2663) in a request's
// clientCapabilities.extensions and in server/discover's
// capabilities.extensions.
const ExtTasks = "io.modelcontextprotocol/tasks"

// TaskMode says whether a tool's call may become a task the gateway holds
// (the values of 2025-11-25's execution.taskSupport).
type TaskMode uint8

const (
	// TaskForbidden: the call always runs synchronously (MRTR rounds as
	// usual).
	TaskForbidden TaskMode = iota
	// TaskOptional: a call whose request declares the Tasks extension
	// becomes a task when it outlasts its window; without the extension
	// it runs synchronously.
	TaskOptional
	// TaskRequired: a request that does not declare the Tasks extension is
	// refused with -32021 before anything reaches the upstream; with it,
	// the client always gets a task (already completed when the call ended
	// within its window).
	TaskRequired
)

// ParseTaskMode parses forbidden, optional or required.
func ParseTaskMode(s string) (TaskMode, error) {
	switch s {
	case "forbidden":
		return TaskForbidden, nil
	case "optional":
		return TaskOptional, nil
	case "required":
		return TaskRequired, nil
	}
	return TaskForbidden, fmt.Errorf("task mode %q: want forbidden, optional or required", s)
}

func (m TaskMode) String() string {
	switch m {
	case TaskOptional:
		return "optional"
	case TaskRequired:
		return "required"
	}
	return "forbidden"
}

// TaskRule is the policy of one tool.
type TaskRule struct {
	Mode TaskMode
	// Window is how long the gateway holds a call whose request declares
	// the extension before it turns it into a task; 0 makes the task at
	// once (before any question of the tool's).
	Window time.Duration
}

// TaskPolicy maps tool names to their rules: Tools by name, then Default
// ("*": every tool not named), then the upstream's own
// execution.taskSupport as its tools/list said (with DefaultWindow), else
// forbidden.
type TaskPolicy struct {
	Tools   map[string]TaskRule
	Default *TaskRule
	// DefaultWindow is the window of the rules taken from an upstream's
	// tools/list.
	DefaultWindow time.Duration
}

// Configured reports whether the policy names any tool or has a default
// that is not forbidden.
func (p *TaskPolicy) Configured() bool {
	if p.Default != nil && p.Default.Mode != TaskForbidden {
		return true
	}
	for _, r := range p.Tools {
		if r.Mode != TaskForbidden {
			return true
		}
	}
	return false
}

// DeclaresTasks reports whether a request's clientCapabilities declare the
// Tasks extension.
func DeclaresTasks(caps []byte) bool {
	found := false
	gjson.GetBytes(caps, "extensions").ForEach(func(k, v gjson.Result) bool {
		if k.String() == ExtTasks && v.IsObject() {
			found = true
			return false
		}
		return true
	})
	return found
}

// taskRule returns the rule of tool on upstream under p, for principal.
func (s *taskSupport) taskRule(p *TaskPolicy, upstream string, principal [16]byte, tool string) TaskRule {
	if r, ok := p.Tools[tool]; ok {
		return r
	}
	if p.Default != nil {
		return *p.Default
	}
	if m, ok := s.mode(upstream, principal, tool); ok {
		return TaskRule{Mode: m, Window: p.DefaultWindow}
	}
	return TaskRule{}
}
