package support

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// answerForm is the form the tools below ask for: one optional string,
// "answer".
var answerForm = map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}

// AddStaggered adds two tools to a legacy server, written for the gather
// policy's tests: no published server asks concurrently with a chosen
// delay between its questions.
//
//   - `pair {n}` asks two questions concurrently, the second n ms after
//     the first (a sibling that may miss the first question's round), and
//     reports both answers as "action:answer,action:answer" ("error" for a
//     question that failed);
//   - `one` asks one question and reports its answer the same way.
//
// The returned channel gets a value just before each delayed question is
// sent.
func AddStaggered(server *mcp.Server) <-chan struct{} {
	late := make(chan struct{}, 16)
	answer := func(res *mcp.ElicitResult, err error) string {
		if err != nil {
			return "error"
		}
		return fmt.Sprint(res.Action, ":", res.Content["answer"])
	}
	mcp.AddTool(server, &mcp.Tool{Name: "pair", Description: "Asks two questions at once, the second n ms later."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			var wg sync.WaitGroup
			answers := make([]string, 2)
			for i := range 2 {
				wg.Go(func() {
					if i == 1 {
						time.Sleep(time.Duration(in.N) * time.Millisecond)
						late <- struct{}{}
					}
					answers[i] = answer(req.Session.Elicit(ctx, &mcp.ElicitParams{Message: fmt.Sprint("question ", i), RequestedSchema: answerForm}))
				})
			}
			wg.Wait()
			return Text(strings.Join(answers, ",")), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "one", Description: "Asks one question."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return Text(answer(req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "the question", RequestedSchema: answerForm}))), nil, nil
		})
	return late
}

// AddMany adds the tool `many {n}` to a legacy server: it asks n questions
// at once (concurrently, so that they fall in one round), waits for them
// all and answers "asked". Written for the per-round input limits: no
// published server asks a chosen number of questions at once. ended, if
// not nil, is told "many: " and the call's context error when it ends.
func AddMany(server *mcp.Server, ended func(string)) {
	mcp.AddTool(server, &mcp.Tool{Name: "many", Description: "Asks n questions at once."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			var wg sync.WaitGroup
			for i := range in.N {
				wg.Go(func() {
					_, _ = req.Session.Elicit(ctx, &mcp.ElicitParams{Message: fmt.Sprint("question ", i), RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
				})
			}
			wg.Wait()
			if ended != nil {
				ended("many: " + fmt.Sprint(ctx.Err()))
			}
			return Text("asked"), nil, nil
		})
}

// AddChatter adds the tool `name {n}` to a legacy server: it asks once
// and, while the call is parked (300 ms later), sends n progress
// notifications (50 when n is 0), then answers "chatted" once its question
// is answered. Written for the bound on what a parked call buffers: no
// published server talks while its question waits. ended, if not nil, is
// told name+": " and the answer's action, or the error that ended the
// question.
func AddChatter(server *mcp.Server, name string, ended func(string)) {
	addChatter(server, name, ended, func(context.Context) bool {
		time.Sleep(300 * time.Millisecond) // the call is parked by then
		return true
	})
}

// AddChatterReleased is AddChatter whose tool sends its notifications when
// release gets a value (one per call), not 300 ms after it asked: a test
// sends it once its client got input_required, when the call is parked
// whatever the machine's load.
func AddChatterReleased(server *mcp.Server, name string, ended func(string), release <-chan struct{}) {
	addChatter(server, name, ended, func(ctx context.Context) bool {
		select {
		case <-release:
			return true
		case <-ctx.Done():
			return false
		}
	})
}

// addChatter is AddChatter, whose notifications wait until parked returns
// true (they are not sent when it returns false).
func addChatter(server *mcp.Server, name string, ended func(string), parked func(context.Context) bool) {
	report := func(s string) {
		if ended != nil {
			ended(name + ": " + s)
		}
	}
	mcp.AddTool(server, &mcp.Tool{Name: name, Description: "Asks once, and sends n progress notifications while it waits."},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			N int `json:"n,omitempty"`
		}) (*mcp.CallToolResult, any, error) {
			n := in.N
			if n == 0 {
				n = 50
			}
			go func() {
				if !parked(ctx) {
					return
				}
				for i := range n {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: name})
				}
			}()
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Sure?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}})
			if err != nil {
				report(err.Error())
				return nil, nil, err
			}
			report(res.Action)
			return Text("chatted"), nil, nil
		})
}
