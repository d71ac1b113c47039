package forward

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// taskState is what a task shows its client, whatever its kind (task).
// mu guards it, except created, which never changes.
type taskState struct {
	mu      sync.Mutex
	status  string
	note    string // statusMessage: why a task was cancelled or failed
	created time.Time
	updated time.Time
	inputs  []pendingInput // shown in inputRequests, not yet answered
	result  []byte         // completed: the modern result
	errObj  []byte         // failed: the JSON-RPC error object
	// forFace marks a task the gateway hosts for a face
	// (Request.HostTask): progress, the params of its call's last progress
	// notification, is kept, and its tasks/get shows it while the task
	// works, in its _meta under MetaProgress (no other client knows the
	// taskId); once the face has read its end, it is forgotten
	// (readByFace).
	forFace  bool
	progress []byte
	// place is the task's place toward max_tasks, given back when the
	// task becomes terminal (task_place.go); set before the task is
	// shared, never changed.
	place *taskPlace
}

// envelope is the task named id as a CreateTaskResult (resultType "task")
// or a DetailedTask (tasks/get, resultType "complete", with its
// inputRequests, result or error when detailed; resultType "": none, as
// notifications/tasks carries it); pollMs 0 shows none.
// The caller holds s.mu.
func (s *taskState) envelope(id, resultType string, ttl time.Duration, pollMs int64, detailed bool) []byte {
	b := make([]byte, 0, 256+len(s.result)+len(s.errObj))
	b = append(b, '{')
	if resultType != "" {
		b = append(b, `"resultType":`...)
		b = translate.AppendJSONString(b, resultType)
		b = append(b, ',')
	}
	b = append(b, `"taskId":`...)
	b = translate.AppendJSONString(b, id)
	b = append(b, `,"status":`...)
	b = translate.AppendJSONString(b, s.status)
	if s.note != "" {
		b = append(b, `,"statusMessage":`...)
		b = translate.AppendJSONString(b, s.note)
	}
	b = append(b, `,"createdAt":`...)
	b = translate.AppendJSONString(b, isoTime(s.created))
	b = append(b, `,"lastUpdatedAt":`...)
	b = translate.AppendJSONString(b, isoTime(s.updated))
	b = append(b, `,"ttlMs":`...)
	b = strconv.AppendInt(b, ttl.Milliseconds(), 10)
	if pollMs > 0 {
		b = append(b, `,"pollIntervalMs":`...)
		b = strconv.AppendInt(b, pollMs, 10)
	}
	if detailed && s.progress != nil && !translate.TaskTerminal(s.status) {
		b = append(b, `,"_meta":{"`+MetaProgress+`":`...)
		b = append(b, s.progress...)
		b = append(b, '}')
	}
	if detailed {
		switch {
		case s.status == translate.TaskInputRequired && len(s.inputs) > 0:
			reqs := make([]translate.InputRequest, len(s.inputs))
			for i, p := range s.inputs {
				reqs[i] = p.InputRequest
			}
			ir := translate.InputRequiredResult(reqs, "") // {"resultType":"input_required","inputRequests":{…}}
			b = append(b, ',')
			b = append(b, ir[len(`{"resultType":"input_required",`):len(ir)-1]...)
		case s.status == translate.TaskCompleted && s.result != nil:
			b = append(b, `,"result":`...)
			b = append(b, s.result...)
		case s.status == translate.TaskFailed && s.errObj != nil:
			b = append(b, `,"error":`...)
			b = append(b, s.errObj...)
		}
	}
	return append(b, '}')
}

// end records the task's end, unless it is terminal already (a late
// result never changes a cancelled task), and gives its place back.
func (s *taskState) end(status string, result, errObj []byte) bool {
	s.mu.Lock()
	if translate.TaskTerminal(s.status) {
		s.mu.Unlock()
		return false
	}
	s.status, s.updated, s.result, s.errObj, s.inputs = status, time.Now(), result, errObj, nil
	s.mu.Unlock()
	s.place.free()
	return true
}

// MetaProgress is the _meta member of a face's task's tasks/get that
// holds its call's last progress notification's params.
const MetaProgress = "caddy-mcp-gateway/progress"

// isoTime formats t as ISO 8601 in UTC, to the millisecond.
func isoTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// taskAnswer is a client's answer to one of a task's questions.
type taskAnswer struct {
	p    pendingInput
	resp json.RawMessage
}

// takeAnswers removes from the task's questions those answers answers
// validly and returns them, for posting upstream. Keys the task does not
// wait for (unknown, answered already) and invalid answers are ignored;
// the answered keys are gone before the ack, so the next tasks/get no
// longer shows them. The caller holds s.mu.
func (s *taskState) takeAnswers(answers map[string]json.RawMessage) []taskAnswer {
	if translate.TaskTerminal(s.status) {
		return nil
	}
	var took []taskAnswer
	still := s.inputs[:0:0]
	for _, p := range s.inputs {
		resp, ok := answers[p.Key]
		if ok && translate.ValidateInputResponse(p.Method, resp) == nil {
			took = append(took, taskAnswer{p, resp})
			continue
		}
		still = append(still, p)
	}
	if len(took) > 0 {
		s.inputs, s.updated = still, time.Now()
		if len(still) == 0 && s.status == translate.TaskInputRequired {
			s.status = translate.TaskWorking
		}
	}
	return took
}

// postAnswers posts answers upstream on sess, as JSON-RPC responses to the
// requests that asked them (upstreamTaskTimeout for all); when the
// upstream refuses one, the task fails and failed runs.
func (b *Bridge) postAnswers(s *taskState, sess *legacy.Session, answers []taskAnswer, failed func()) *jsonrpc.RPCError {
	ctx, cancel := context.WithTimeout(b.ctx, upstreamTaskTimeout)
	defer cancel()
	for _, a := range answers {
		if err := sess.Respond(ctx, a.p.upstreamID, a.resp, nil); err != nil {
			e := taskErrorObject("the upstream refused an answer; the task was cancelled")
			if s.end(translate.TaskFailed, nil, e) {
				failed()
			}
			return translate.UpstreamError(err)
		}
	}
	return nil
}
