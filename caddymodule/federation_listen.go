package caddymodule

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/federate"
)

// subscriptions/listen on a federated block: each server is asked to
// listen for what concerns it (list changes: every server; a resource:
// the server that has it; a task: the server whose taskId it is), and
// their streams are merged onto the client's: one acknowledgement (what
// the servers honour together, sent once each answered its own or
// list_timeout passed), then every notification as it comes, taskIds in
// the block's namespace. A server whose stream ends leaves the others
// going; when none is left the client's stream ends with the graceful
// end's response.

// listenEvent is one message of a server's listen stream, or its end
// (msg nil).
type listenEvent struct {
	server int
	msg    []byte
}

// listenFlags are the boolean filters every server is asked for.
var listenFlags = []string{"toolsListChanged", "promptsListChanged", "resourcesListChanged"}

func (h *Handler) serveMergedListen(w http.ResponseWriter, r *http.Request, req *translate.ModernRequest, body []byte) error {
	f := h.fed
	filter := gjson.GetBytes(body, "params.notifications")
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan listenEvent, 64)
	active := 0
	for i := range f.servers {
		nb, ok := h.listenBody(r, body, filter, i)
		if !ok {
			continue
		}
		active++
		inner := r.Clone(ctx)
		go func() {
			sink := &listenSink{server: i, events: events, ctx: ctx, header: make(http.Header)}
			_ = f.servers[i].route(sink, inner, nb)
			sink.line(nil) // a message not ended by a newline
			select {
			case events <- listenEvent{server: i}:
			case <-ctx.Done():
			}
		}()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(msg []byte) error {
		if _, err := w.Write(append(append([]byte("data: "), msg...), '\n', '\n')); err != nil {
			return err
		}
		return rc.Flush()
	}

	// The acknowledgements first: each server's first message.
	acks := make([]listenEvent, 0, active)
	var early []listenEvent
	deadline := time.NewTimer(f.listTimeout)
	defer deadline.Stop()
	acked := make([]bool, len(f.servers))
	for waiting := active; waiting > 0; {
		select {
		case ev := <-events:
			switch {
			case ev.msg == nil:
				active--
				if !acked[ev.server] {
					waiting--
				}
			case !acked[ev.server] && gjson.GetBytes(ev.msg, "method").String() == "notifications/subscriptions/acknowledged":
				acked[ev.server] = true
				waiting--
				acks = append(acks, ev)
			default:
				early = append(early, ev)
			}
		case <-deadline.C:
			waiting = 0
		case <-ctx.Done():
			return nil
		}
	}
	if err := send(h.mergedAck(req.ID, acks)); err != nil {
		return nil
	}
	for _, ev := range early {
		if err := h.sendListened(send, ev); err != nil {
			return nil
		}
	}
	for active > 0 {
		select {
		case ev := <-events:
			if ev.msg == nil {
				active--
				continue
			}
			if err := h.sendListened(send, ev); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
	_ = send(translate.ListenCompletion(req.ID, gatewayServerInfo))
	return nil
}

// sendListened passes on one notification of server ev.server: not its
// acknowledgement (sent merged), nor its stream's end (the block's stream
// goes on while another server's does).
func (h *Handler) sendListened(send func([]byte) error, ev listenEvent) error {
	m := gjson.ParseBytes(ev.msg)
	method := m.Get("method").String()
	if method == "" || method == "notifications/subscriptions/acknowledged" {
		return nil
	}
	if strings.HasSuffix(method, "/list_changed") {
		// The merged pages kept may be stale now.
		h.fed.lists.pages.Purge()
	}
	msg := ev.msg
	if id := m.Get("params.taskId"); id.Type == gjson.String {
		if out, err := federate.SetString(msg, "params.taskId", federate.WrapTaskID(federate.ServerName(h.fed.servers[ev.server].serverName), id.Str)); err == nil {
			msg = out
		}
	}
	return send(msg)
}

// listenBody is the listen request server i is sent, and whether it has
// anything to listen for: the list-change flags the client asked, the
// resources it has, the client's taskIds that are its (unwrapped).
func (h *Handler) listenBody(r *http.Request, body []byte, filter gjson.Result, i int) ([]byte, bool) {
	f := h.fed
	b := []byte{'{'}
	for _, flag := range listenFlags {
		if filter.Get(flag).Bool() {
			b = jsonrpc.AppendMember(b, jsonrpc.Quote(flag), "true")
		}
	}
	var uris []string
	for _, u := range filter.Get("resourceSubscriptions").Array() {
		if owner, ok := h.resourceOwner(r, body, u.String()); ok && owner == i {
			uris = append(uris, jsonrpc.Quote(u.String()))
		}
	}
	if len(uris) > 0 {
		b = jsonrpc.AppendMember(b, `"resourceSubscriptions"`, "["+strings.Join(uris, ",")+"]")
	}
	var ids []string
	for _, t := range filter.Get("taskIds").Array() {
		if s, id, ok := f.set.UnwrapTaskID(t.String()); ok && s == i {
			ids = append(ids, jsonrpc.Quote(id))
		}
	}
	if len(ids) > 0 {
		b = jsonrpc.AppendMember(b, `"taskIds"`, "["+strings.Join(ids, ",")+"]")
	}
	if len(b) == 1 {
		return nil, false
	}
	b = append(b, '}')
	params := gjson.GetBytes(body, "params")
	p := jsonrpc.SetMember(params.Raw, "notifications", string(b))
	nb := make([]byte, 0, len(body)+len(p))
	nb = append(nb, body[:params.Index]...)
	nb = append(nb, p...)
	return append(nb, body[params.Index+len(params.Raw):]...), true
}

// mergedAck is the block's acknowledgement: what the servers honour
// together (a flag any honours; every resource and taskId one honours,
// taskIds in the block's namespace).
func (h *Handler) mergedAck(id []byte, acks []listenEvent) []byte {
	b := []byte{'{'}
	for _, flag := range listenFlags {
		for _, a := range acks {
			if gjson.GetBytes(a.msg, "params.notifications."+flag).Bool() {
				b = jsonrpc.AppendMember(b, jsonrpc.Quote(flag), "true")
				break
			}
		}
	}
	var uris, ids []string
	for _, a := range acks {
		for _, v := range gjson.GetBytes(a.msg, "params.notifications.resourceSubscriptions").Array() {
			uris = append(uris, v.Raw)
		}
		server := federate.ServerName(h.fed.servers[a.server].serverName)
		for _, v := range gjson.GetBytes(a.msg, "params.notifications.taskIds").Array() {
			if v.Type == gjson.String {
				ids = append(ids, jsonrpc.Quote(federate.WrapTaskID(server, v.Str)))
			}
		}
	}
	if len(uris) > 0 {
		b = jsonrpc.AppendMember(b, `"resourceSubscriptions"`, "["+strings.Join(uris, ",")+"]")
	}
	if len(ids) > 0 {
		b = jsonrpc.AppendMember(b, `"taskIds"`, "["+strings.Join(ids, ",")+"]")
	}
	b = append(b, '}')
	return []byte(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":` + string(b) +
		`,"_meta":{"io.modelcontextprotocol/subscriptionId":` + string(id) + `}}}`)
}

// listenSink is the ResponseWriter of a server's listen stream: each data
// line is a message, handed over as it comes.
type listenSink struct {
	server int
	events chan<- listenEvent
	ctx    context.Context
	header http.Header
	held   []byte
	json   bool
}

func (s *listenSink) Header() http.Header { return s.header }

func (s *listenSink) WriteHeader(int) {}

func (s *listenSink) Write(b []byte) (int, error) {
	if !s.json && len(s.held) == 0 && !bytes.HasPrefix([]byte(s.header.Get("Content-Type")), []byte("text/event-stream")) {
		s.json = true // an error answer: this server does not listen
	}
	if s.json {
		return len(b), nil
	}
	s.held = append(s.held, b...)
	if err := eachLine(&s.held, s.line); err != nil {
		return 0, err
	}
	if len(s.held) > 1<<20 {
		s.held = nil // a line no message has
	}
	return len(b), nil
}

// line hands over the message of one data line.
func (s *listenSink) line(l []byte) error {
	if l == nil {
		l, s.held = s.held, nil
	}
	data, ok := sseData(l)
	if !ok || jsonrpc.ValidJSON(data) != nil {
		return nil
	}
	select {
	case s.events <- listenEvent{server: s.server, msg: append([]byte(nil), data...)}:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *listenSink) Flush() {}
