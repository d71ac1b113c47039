package forward

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
)

// listenFilter is what a subscriptions/listen request asks for.
type listenFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
	// TaskIDs are the tasks followed (task_push.go), in the ack only.
	TaskIDs []string `json:"taskIds,omitempty"`
}

// listen serves subscriptions/listen from a legacy upstream: a session of its
// own, whose GET stream carries the list-changed and resource-updated
// notifications (with resources/subscribe for each requested URI), and
// the notifications/tasks of the tasks tw follows (task_push.go; nil:
// none). The stream starts with the acknowledgement of what is honoured;
// every notification carries the subscription id. The gateway ends it the
// graceful way (translate.ListenCompletion) when ctx ends (the gateway
// closes the stream: a reload, a stop; or the client left, which makes
// the answer harmless) and when the upstream is gone: the session's GET
// stream ended and could not be opened again (legacy.Session.StreamLost),
// so that the client listens again, on whichever upstream is there. The
// session is ended with the subscription.
func (b *Bridge) listen(ctx context.Context, c *call, r Request, params []byte, tw *taskWatch, sink translate.Sink) {
	defer b.pool.Release(c.key, c.sess, false)
	asked := askedFilter(gjson.GetBytes(params, "notifications"))
	caps := gjson.GetBytes(c.sess.InitResult, "capabilities")
	honoured := listenFilter{
		ToolsListChanged:     asked.ToolsListChanged && caps.Get("tools.listChanged").Bool(),
		PromptsListChanged:   asked.PromptsListChanged && caps.Get("prompts.listChanged").Bool(),
		ResourcesListChanged: asked.ResourcesListChanged && caps.Get("resources.listChanged").Bool(),
		TaskIDs:              tw.acceptedIDs(),
	}
	if caps.Get("resources.subscribe").Bool() {
		for _, uri := range asked.ResourceSubscriptions {
			p, _ := json.Marshal(struct {
				URI string `json:"uri"`
			}{uri})
			if call, err := c.sess.Call(ctx, "resources/subscribe", p); err == nil {
				m, err := call.Final()
				call.Close()
				if err == nil && gjson.GetBytes(m.Raw, "result").Exists() {
					honoured.ResourceSubscriptions = append(honoured.ResourceSubscriptions, uri)
				}
			}
		}
	}
	// Notifications sent upstream before the GET stream is open would be
	// lost: wait for it (briefly) before acknowledging.
	select {
	case <-c.sess.Listening():
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return
	}
	subID := r.ID
	completion := translate.ListenCompletion(subID, translate.ServerInfo(c.sess.InitResult))
	ack, _ := json.Marshal(jsonrpc.NewRequest(nil, "notifications/subscriptions/acknowledged", ackParams{
		Meta: subscriptionMeta{SubscriptionID: subID}, Notifications: honoured,
	}))
	if sink.Notify(ack) != nil {
		return
	}
	sendTask := func(msg []byte) error {
		return sink.Notify(tagSubscription(jsonrpc.Message{Method: "notifications/tasks", Raw: msg}, subID))
	}
	if tw != nil && tw.start(ctx, sendTask) != nil {
		return
	}
	pollC, stopPoll := tw.pollC()
	defer stopPoll()
	for {
		select {
		case <-tw.wakeC():
			if tw.drain(sendTask) != nil {
				return
			}
		case <-pollC:
			if tw.poll(ctx, sendTask) != nil {
				return
			}
		case m := <-c.sess.Inbox():
			switch {
			case m.Kind == jsonrpc.KindRequest:
				// Nobody can answer for the client on a subscription.
				res, errObj := translate.CancelAnswer(m.Method)
				rctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
				_ = c.sess.Respond(rctx, m.ID, res, errObj)
				cancel()
			case m.Kind == jsonrpc.KindNotification && honoured.wants(m):
				if sink.Notify(tagSubscription(m, subID)) != nil {
					return
				}
			}
		case <-c.sess.StreamLost(): // the upstream is gone
			_ = sink.Respond(http.StatusOK, completion)
			return
		case <-ctx.Done(): // the gateway closes the stream, or the client left
			_ = sink.Respond(http.StatusOK, completion)
			return
		}
	}
}

func (f listenFilter) wants(m jsonrpc.Message) bool {
	switch m.Method {
	case "notifications/tools/list_changed":
		return f.ToolsListChanged
	case "notifications/prompts/list_changed":
		return f.PromptsListChanged
	case "notifications/resources/list_changed":
		return f.ResourcesListChanged
	case "notifications/resources/updated":
		uri := gjson.GetBytes(m.Raw, "params.uri").String()
		for _, u := range f.ResourceSubscriptions {
			if u == uri {
				return true
			}
		}
	}
	return false
}

// tagSubscription adds _meta.subscriptionId to a notification: its params
// are edited by splicing (jsonrpc.SetMember), the subscription id set in
// their _meta, which is added when absent or not an object.
func tagSubscription(m jsonrpc.Message, id json.RawMessage) []byte {
	params := "{}"
	if p := gjson.GetBytes(m.Raw, "params"); p.IsObject() {
		params = p.Raw
	}
	meta := "{}"
	if v := gjson.Get(params, "_meta"); v.IsObject() { // the first _meta, as SetMember keeps it
		meta = v.Raw
	}
	params = jsonrpc.SetMember(params, "_meta", jsonrpc.SetMember(meta, translate.MetaSubscriptionID, string(id)))
	out, _ := json.Marshal(jsonrpc.NewRequest(nil, m.Method, json.RawMessage(params)))
	return out
}

// askedFilter reads the notifications filter of a subscriptions/listen:
// members of the wrong type count as absent.
func askedFilter(n gjson.Result) listenFilter {
	f := listenFilter{
		ToolsListChanged:     n.Get("toolsListChanged").Type == gjson.True,
		PromptsListChanged:   n.Get("promptsListChanged").Type == gjson.True,
		ResourcesListChanged: n.Get("resourcesListChanged").Type == gjson.True,
	}
	n.Get("resourceSubscriptions").ForEach(func(_, v gjson.Result) bool {
		if v.Type == gjson.String {
			f.ResourceSubscriptions = append(f.ResourceSubscriptions, v.Str)
		}
		return true
	})
	return f
}

// subscriptionMeta is the _meta of the messages of a subscription.
type subscriptionMeta struct {
	SubscriptionID json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
}

// ackParams are the params of notifications/subscriptions/acknowledged
// (its fields in name order, the order the gateway has always sent them
// in).
type ackParams struct {
	Meta          subscriptionMeta `json:"_meta"`
	Notifications listenFilter     `json:"notifications"`
}
