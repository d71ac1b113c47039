package forward

import (
	"context"
	"encoding/json"
	"time"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// The runner of a task, of either kind: one goroutine that follows the
// upstream from the task's creation to its end. It reads the streams its
// kind's taskRunner opens (a hosted task's call, once; an upstream's
// tasks/result, again when it breaks), turns the upstream's questions into
// the task's inputRequests (after TaskGather, so that siblings asked at
// once show together), and on the task's cancellation lets the upstream
// go.

// taskStep is what the runner does once its stream ended, or could not be
// opened.
type taskStep uint8

const (
	stepOn    taskStep = iota // read the (next) stream
	stepLetGo                 // the task was cancelled: let the upstream go
	stepDone                  // the task ended: stop
)

// taskRunner is the runner's part that depends on the task's kind.
type taskRunner interface {
	// open starts the stream to read: stepOn with its messages, else
	// what to do (a failure to open is recorded already).
	open() (<-chan jsonrpc.Message, taskStep)
	// pop returns a message that arrived before the runner started, to
	// read before the stream.
	pop() (jsonrpc.Message, bool)
	// inboxAsks reports whether a request on the session's standalone
	// stream is a question of the task's (else it is ignored).
	inboxAsks() bool
	// question takes a request of the upstream's: a question for the
	// client, or answered at once (false).
	question(m jsonrpc.Message) (pendingInput, bool)
	// callID is the id of the request whose response ends the task.
	callID() json.RawMessage
	// final ends the task with that response.
	final(m jsonrpc.Message)
	// broke handles the stream's end before that response.
	broke() taskStep
	// letGo ends the hold on the upstream of a task cancelled (or
	// failed by tasks/update): asked are its questions still open.
	letGo(asked []pendingInput, why string)
	// done releases what the runner held, when it returns.
	done()
}

// rechecker is a taskRunner whose stream may go silent for good while the
// upstream goes on (a stream reopened on an upstream that sends nothing
// live after its replay): after quiet with no message and no question
// open, the runner calls reopen, then open again.
type rechecker interface {
	quiet() time.Duration
	reopen()
}

// startRunner runs t's runner (runTask) in its own goroutine; Close
// waits for it.
func (b *Bridge) startRunner(t *task, c *call, run taskRunner) {
	b.taskRuns.Add(1)
	go func() {
		defer b.taskRuns.Done()
		b.runTask(t, c, run)
	}()
}

// runTask follows the upstream for t, made by c, until the task ends, t is
// cancelled (its stop) or the gateway stops.
func (b *Bridge) runTask(t *task, c *call, run taskRunner) {
	defer run.done()
	var gather <-chan time.Time
	var fresh []pendingInput // asked, not yet shown
	letGo := func(why string) {
		t.mu.Lock()
		asked := append(append([]pendingInput(nil), t.inputs...), fresh...)
		t.mu.Unlock()
		run.letGo(asked, why)
	}
	var quiet *time.Timer
	var quietC <-chan time.Time
	rc, _ := run.(rechecker)
	if rc != nil && rc.quiet() > 0 {
		quiet = time.NewTimer(rc.quiet())
		defer quiet.Stop()
		quietC = quiet.C
	}
	for {
		msgs, step := run.open()
	read:
		for step == stepOn {
			t.mu.Lock()
			first := !t.recordResumes && t.resume.ok && t.resume.after != ""
			t.mu.Unlock()
			if first {
				// The last message handled, another instance can now
				// resume the call from the record.
				b.persist(t)
			}
			m, ok := run.pop()
			inbox := false
			if !ok {
				ok = true
				select {
				case m, ok = <-msgs:
				case m = <-t.sess.Inbox():
					if !run.inboxAsks() {
						continue
					}
					inbox = true
				case <-gather:
					gather = nil
					t.mu.Lock()
					if !translate.TaskTerminal(t.status) {
						t.inputs = append(t.inputs, fresh...)
						t.status, t.updated = translate.TaskInputRequired, time.Now()
						t.resume.keys = c.keys.AppendBinary(nil)
						fresh = nil
						t.unshown = false
					}
					t.mu.Unlock()
					b.persist(t)
					continue
				case <-quietC:
					quiet.Reset(rc.quiet())
					t.mu.Lock()
					asking := len(t.inputs)+len(fresh) > 0
					t.mu.Unlock()
					if asking {
						continue
					}
					rc.reopen()
					break read
				case <-t.stop:
					letGo("task cancelled")
					return
				case <-b.ctx.Done():
					b.cancelTask(t, "gateway shutting down")
					letGo("gateway shutting down")
					return
				}
			}
			if ok {
				if quiet != nil {
					quiet.Reset(rc.quiet())
				}
				// A request on the session's standalone stream (roots/list)
				// is not the call's: once answered, no replay needs it.
				if !inbox {
					t.mu.Lock()
					t.resume.saw(m.After, len(t.inputs)+len(fresh) > 0)
					t.mu.Unlock()
				}
			}
			switch {
			case !ok:
				step = run.broke()
				break read
			case m.Kind == jsonrpc.KindRequest:
				p, asks := run.question(m)
				if !asks {
					continue
				}
				if run.inboxAsks() {
					b.learnStream(c, inbox)
				}
				t.mu.Lock()
				if len(fresh) == 0 {
					// Not shown yet: a record written meanwhile counts
					// the messages handled before this one only (the
					// call's: one from the standalone stream is not).
					t.resume.shown = t.resume.seen
					if !inbox {
						t.resume.shown--
					}
				}
				t.unshown = true
				fresh = append(fresh, p)
				n := len(t.inputs) + len(fresh)
				t.mu.Unlock()
				if n > c.opts.MaxInputsPerRound*c.opts.MaxRounds {
					b.cancelTask(t, "too many requests for input")
					letGo("too many requests for input")
					return
				}
				if gather == nil {
					gather = time.After(TaskGather)
				}
			case inbox:
			case m.Kind == jsonrpc.KindNotification && m.Method == "notifications/progress":
				t.mu.Lock()
				if t.forFace {
					t.progress = append([]byte(nil), m.Params()...)
				}
				t.mu.Unlock()
			case m.Kind == jsonrpc.KindResponse && string(m.ID) == string(run.callID()):
				run.final(m)
				return
			}
		}
		switch step {
		case stepLetGo:
			letGo("task cancelled")
			return
		case stepDone:
			return
		}
	}
}

// taskQuestion takes a request the upstream made during c's task, with
// params (its own, or as the kind shows them), as upstreamRequest does for
// a running call: an input request the task's client can answer is
// returned as a question; others are answered at once (answerAside).
func (b *Bridge) taskQuestion(c *call, m jsonrpc.Message, params []byte) (pendingInput, bool) {
	if m.Method == "ping" || !translate.IsInputMethod(m.Method) || !translate.ClientSupports(c.caps, m.Method, params) {
		answerAside(b.ctx, c.sess, m)
		return pendingInput{}, false
	}
	ir, err := translate.NewInputRequest(m.Method, params, &c.keys)
	if err != nil {
		answerAside(b.ctx, c.sess, m)
		return pendingInput{}, false
	}
	return pendingInput{InputRequest: ir, upstreamID: m.ID}, true
}

// answerAside answers a request the upstream made outside a task's
// questions: ping, else a refusal (a cancellation for an input request).
func answerAside(ctx context.Context, sess *legacy.Session, m jsonrpc.Message) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if m.Method == "ping" {
		_ = sess.Respond(ctx, m.ID, []byte("{}"), nil)
		return
	}
	if translate.IsInputMethod(m.Method) {
		res, errObj := translate.CancelAnswer(m.Method)
		_ = sess.Respond(ctx, m.ID, res, errObj)
		return
	}
	_ = sess.Respond(ctx, m.ID, nil, []byte(`{"code":-32601,"message":"Method not found"}`))
}

// taskError is the JSON-RPC error object of a task that failed in the
// gateway's hands (its upstream's own errors are reshaped instead).
type taskError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// taskErrorObject is a failed task's error object, -32603 with message.
func taskErrorObject(message string) []byte {
	e, _ := json.Marshal(taskError{Code: jsonrpc.InternalError, Message: message})
	return e
}
