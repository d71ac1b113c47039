package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// restCaller makes tool calls through the gateway's REST face (option
// `rest`, SEP-1597): one PUT <base>/tools/{tool}/calls/{id} per call, a
// new id each time, with an Idempotency-Key; a question is answered with
// POST …/advance (If-Match), a call still running is polled with GET. The
// target's URL is the REST base (http://host:port/api).
type restCaller struct {
	c      *client
	tool   string
	args   string
	prefix string
	n      int
}

func newREST(c *client, tool, args string) *restCaller {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &restCaller{c: c, tool: tool, args: args, prefix: "bench-" + hex.EncodeToString(b[:])}
}

func (rc *restCaller) call(ctx context.Context) error {
	rc.n++
	id := rc.prefix + "-" + strconv.Itoa(rc.n)
	url := rc.c.url + "/tools/" + rc.tool + "/calls/" + id
	res, err := rc.do(ctx, http.MethodPut, url, map[string]string{"Idempotency-Key": id}, `{"arguments":`+rc.args+`}`)
	for k := 0; err == nil && k < 10*maxRounds; k++ {
		switch st := res.Get("status").String(); st {
		case "success":
			return nil
		case "awaitingElicitationResult":
			res, err = rc.do(ctx, http.MethodPost, url+"/advance", map[string]string{"If-Match": `"` + res.Get("etag").String() + `"`}, answer)
		case "running", "submitted":
			time.Sleep(10 * time.Millisecond)
			res, err = rc.do(ctx, http.MethodGet, url, nil, "")
		default:
			return fmt.Errorf("call %s: %.300s", st, res.Raw)
		}
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("the call did not end: %.300s", res.Raw)
}

// do makes one request and returns its JSON answer (a 2xx one).
func (rc *restCaller) do(ctx context.Context, method, url string, hdr map[string]string, body string) (gjson.Result, error) {
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return gjson.Result{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := rc.c.hc.Do(req)
	if err != nil {
		return gjson.Result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return gjson.Result{}, err
	}
	if resp.StatusCode/100 != 2 {
		return gjson.Result{}, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, b)
	}
	return gjson.ParseBytes(b), nil
}
