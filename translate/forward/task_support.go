package forward

import (
	"container/list"
	"sync"

	"github.com/tidwall/gjson"
)

// taskSupport remembers the execution.taskSupport of the tools each
// upstream listed (tools/list through the bridge), for the tools the
// policy does not name. What a listing says is kept for the principal it
// was listed for only: an upstream may list its tools differently to each
// caller, and one principal's listing must not make another's tool
// required (-32021) or a task. Bounded: at most maxLearnedTools tools per
// (upstream, principal), and maxLearnedTotal in all, the least recently
// learned (upstream, principal) forgotten first.
type taskSupport struct {
	mu    sync.Mutex
	m     map[supportKey]*learnedTools
	order list.List // of supportKey, most recently learned first
	total int       // tools across m
}

// supportKey is whose listing of which upstream a learnedTools holds.
type supportKey struct {
	upstream  string
	principal [16]byte
}

type learnedTools struct {
	tools map[string]TaskMode
	elem  *list.Element
}

// Bounds of taskSupport. A tool name longer than maxLearnedName is not
// learned (its calls take forbidden).
const (
	maxLearnedTools = 4096
	maxLearnedTotal = 1 << 16
	maxLearnedName  = 512
)

// learn records what a tools/list result listed for principal says; a page
// replaces nothing else (tools/list may be paginated).
func (s *taskSupport) learn(upstream string, principal [16]byte, result []byte) {
	tools := gjson.GetBytes(result, "tools")
	if !tools.IsArray() {
		return
	}
	k := supportKey{upstream, principal}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[supportKey]*learnedTools)
	}
	known := s.m[k]
	if known == nil {
		known = &learnedTools{tools: make(map[string]TaskMode)}
		known.elem = s.order.PushFront(k)
		s.m[k] = known
	} else {
		s.order.MoveToFront(known.elem)
	}
	tools.ForEach(func(_, t gjson.Result) bool {
		name := t.Get("name")
		if name.Type != gjson.String || len(name.Str) > maxLearnedName {
			return true
		}
		mode, err := ParseTaskMode(t.Get("execution.taskSupport").String())
		if err != nil {
			mode = TaskForbidden
		}
		if _, ok := known.tools[name.Str]; ok {
			known.tools[name.Str] = mode
		} else if len(known.tools) < maxLearnedTools {
			known.tools[name.Str] = mode
			s.total++
		}
		return true
	})
	for s.total > maxLearnedTotal && s.order.Len() > 1 {
		s.forgetLocked(s.order.Back().Value.(supportKey))
	}
}

// forgetLocked drops what k's listing said. s.mu is held.
func (s *taskSupport) forgetLocked(k supportKey) {
	if l := s.m[k]; l != nil {
		s.total -= len(l.tools)
		s.order.Remove(l.elem)
		delete(s.m, k)
	}
}

// mode returns what upstream's tools/list, listed for principal, said of
// tool.
func (s *taskSupport) mode(upstream string, principal [16]byte, tool string) (TaskMode, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.m[supportKey{upstream, principal}]
	if l == nil {
		return TaskForbidden, false
	}
	m, ok := l.tools[tool]
	return m, ok
}

// any reports whether some tool of upstream, as listed for principal, may
// become a task.
func (s *taskSupport) any(upstream string, principal [16]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.m[supportKey{upstream, principal}]
	if l == nil {
		return false
	}
	for _, m := range l.tools {
		if m != TaskForbidden {
			return true
		}
	}
	return false
}
