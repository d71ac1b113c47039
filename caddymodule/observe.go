package caddymodule

import (
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/forward"
)

// The cells: the era of the client, then the era of the upstream
// ({http.mcp_gateway.cell}, the `cell` label and log field).
const (
	cellForward = "modern-legacy" // the forward bridge
	cellReverse = "legacy-modern" // the reverse bridge
	cellPinned  = "legacy-legacy" // legacy pass-through, pinned sessions
	cellModern  = "modern-modern" // modern pass-through
	cellNone    = "none"          // refused before an upstream was chosen
)

// Outcomes of a pass-through request, from its HTTP status (the bridges
// report theirs: translate.Outcome*).
const (
	outcomeOK        = "ok"
	outcomeError     = "error"
	outcomeCancelled = translate.OutcomeCancelled
)

// maxUnsafeBody bounds the request body logged with log_unsafe_details.
const maxUnsafeBody = 4096

// maxLogged bounds every string a client chose (a method, a tool's or
// resource's name, a reason quoting them) in a log line.
const maxLogged = translate.MaxMethodLength

// clipLogged clips a client's string for a log line.
func clipLogged(s string) string { return clipText(s, maxLogged) }

// callObserver is the bridges' translate.Observer for one handler: the
// call metrics and one log line per bridged call.
type callObserver struct {
	metrics *gatewayMetrics
	logger  *zap.Logger
	done    <-chan struct{} // the configuration's context (see metricsFor)
}

// CallEnded implements translate.Observer.
func (o callObserver) CallEnded(rep translate.CallReport) {
	cell := cellForward
	if rep.Bridge == "reverse" {
		cell = cellReverse
	}
	metricsFor(o.done, o.metrics).callEnded(cell, rep)
	c := o.logger.Check(zapcore.InfoLevel, "bridged call")
	if c == nil {
		return
	}
	fields := []zap.Field{
		zap.String("cell", cell), zap.String("method", clipLogged(rep.Method)), zap.String("upstream", rep.Upstream),
		zap.Int("rounds", rep.Rounds), zap.String("outcome", rep.Outcome),
		zap.Duration("duration", rep.Duration), zap.Duration("overhead", rep.Overhead),
	}
	if rep.Reason != "" {
		fields = append(fields, zap.String("reason", clipLogged(rep.Reason)))
	}
	if o.logger.Core().Enabled(zapcore.DebugLevel) && rep.Name != "" {
		fields = append(fields, zap.String("name", clipLogged(rep.Name)))
	}
	c.Write(fields...)
}

// Resumable implements translate.ResumeObserver: the resumable calls'
// counter.
func (o callObserver) Resumable(event string) { metricsFor(o.done, o.metrics).resumableEvent(event) }

// TaskChanged implements translate.TaskObserver: the task metrics, and a
// log line when a task is created (debug) and when it ends (info). The
// lines carry no taskId, principal, arguments or result.
func (o callObserver) TaskChanged(rep forward.TaskReport) {
	metricsFor(o.done, o.metrics).taskChanged(rep)
	level, msg := zapcore.DebugLevel, "task created"
	if rep.Event == "ended" {
		level, msg = zapcore.InfoLevel, "task ended"
	}
	if c := o.logger.Check(level, msg); c != nil {
		c.Write(zap.String("cell", cellForward), zap.String("upstream", rep.Upstream), zap.String("tool", clipLogged(rep.Tool)),
			zap.String("status", rep.Status), zap.Duration("age", rep.Age))
	}
}

// TaskStored implements forward.TaskStoreObserver: the task records'
// counter, and a log line: warn when a record could not be written or
// deleted (with the error; the task goes on in memory), info when this
// instance took a task over or a task was lost with its owner. The lines
// carry no taskId, principal, arguments or result.
func (o callObserver) TaskStored(event, upstream, tool string, err error) {
	metricsFor(o.done, o.metrics).taskStored(event)
	level, msg := zapcore.InfoLevel, "task record event"
	switch event {
	case forward.StoreFailed:
		level, msg = zapcore.WarnLevel, "task record not stored (the task goes on in memory)"
	case forward.StoreTakenOver:
		msg = "task taken over"
	case forward.StoreLost:
		msg = "task lost with its owner"
	}
	c := o.logger.Check(level, msg)
	if c == nil {
		return
	}
	fields := []zap.Field{zap.String("cell", cellForward), zap.String("event", event),
		zap.String("upstream", upstream), zap.String("tool", clipLogged(tool))}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	c.Write(fields...)
}

// Unparked implements translate.Observer.
func (o callObserver) Unparked(why string) { metricsFor(o.done, o.metrics).unparked(why) }

// served records how a bridge answered the request in the round and
// outcome placeholders.
func served(r *http.Request, s translate.Served) {
	setPlaceholder(r, "round", strconv.Itoa(s.Round))
	if s.Outcome != "" {
		setPlaceholder(r, "outcome", s.Outcome)
	}
}

// observeRequest completes the placeholders of a served request, counts it
// and logs it at debug level (with the request's secrets only when
// log_unsafe_details is on).
func (h *Handler) observeRequest(r *http.Request, status int, body []byte, start time.Time) {
	cell, method, outcome := placeholder(r, "cell"), placeholder(r, "method"), placeholder(r, "outcome")
	if cell == "" {
		cell = cellNone
		setPlaceholder(r, "cell", cell)
	}
	switch {
	case method != "":
	case r.Method != http.MethodPost:
		method = r.Method
	case gjson.GetBytes(body, "result").Exists() || gjson.GetBytes(body, "error").Exists():
		method = "response" // a client's answer to a server's request
	}
	if outcome == "" {
		switch {
		case status == 499 || r.Context().Err() != nil:
			outcome = outcomeCancelled
		case status >= 400:
			outcome = outcomeError
		default:
			outcome = outcomeOK
		}
		setPlaceholder(r, "outcome", outcome)
	}
	h.metrics.request(cell, method, outcome, placeholder(r, "server"))

	c := h.logger.Check(zapcore.DebugLevel, "mcp request")
	if c == nil {
		return
	}
	fields := []zap.Field{
		zap.String("cell", cell), zap.String("method", clipLogged(method)), zap.Int("status", status),
		zap.String("outcome", outcome), zap.String("round", placeholder(r, "round")), zap.String("upstream", placeholder(r, "upstream")),
		zap.Duration("duration", time.Since(start)),
	}
	if h.Security.LogUnsafeDetails {
		if len(body) > maxUnsafeBody {
			body = body[:maxUnsafeBody]
		}
		fields = append(fields,
			zap.String("unsafe_session_id", r.Header.Get("Mcp-Session-Id")),
			zap.String("unsafe_principal", h.principalValue(r)),
			zap.ByteString("unsafe_body", body))
	}
	c.Write(fields...)
}

// Interface guards
var (
	_ translate.Observer        = callObserver{}
	_ forward.TaskObserver      = callObserver{}
	_ forward.ResumeObserver    = callObserver{}
	_ forward.TaskStoreObserver = callObserver{}
)
