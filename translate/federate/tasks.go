package federate

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
)

// WrapTaskID is the taskId a client is shown for server's task id:
// "<server>:<id>". A server name never holds ':', so the first ':' ends
// it.
func WrapTaskID(server ServerName, id string) string {
	return string(server) + ":" + id
}

// UnwrapTaskID splits a taskId made by WrapTaskID into its server's index
// and the server's own task id; !ok when it has no ':', names no server
// of s, or has an empty id.
//
// The wrapping only routes: anyone may write "<other>:<id>", and it goes
// to that other server with that id. What keeps a client from another's
// task is the server's own check of its task ids (and the gateway's own
// per-server keys for the tasks it hosts), not this name.
func (s *Set) UnwrapTaskID(wrapped string) (server int, id string, ok bool) {
	name, id, _ := strings.Cut(wrapped, ":") // no ':': id is ""
	if id == "" {
		return -1, "", false
	}
	i, known := s.index[ServerName(name)]
	if !known {
		return -1, "", false
	}
	return i, id, true
}

// WrapTaskIDs rewrites the top-level string member `taskId` of a result
// object (a CreateTaskResult, a DetailedTask, the params of a
// `notifications/tasks`) to WrapTaskID(server, it), every copy of it;
// the rest of result is kept byte for byte. result is returned unchanged
// when it is not a valid JSON object or has no string taskId.
func WrapTaskIDs(result []byte, server ServerName) []byte {
	body := bytes.TrimLeft(result, " \t\r\n")
	if len(body) == 0 || body[0] != '{' || jsonrpc.ValidJSON(result) != nil {
		return result
	}
	start := len(result) - len(body) // members' offsets are from the '{'
	ms, _ := jsonrpc.Members(string(body))
	var sp []jsonrpc.Splice
	for _, m := range ms {
		if m.Name == "taskId" && m.Val.Type == gjson.String {
			at := start + m.Val.Index
			sp = append(sp, jsonrpc.Splice{At: at, End: at + len(m.Val.Raw), Text: jsonrpc.Quote(WrapTaskID(server, m.Val.Str))})
		}
	}
	if len(sp) == 0 {
		return result
	}
	return jsonrpc.ApplySplices(string(result), sp)
}
