package caddymodule

import "bytes"

// What the federated block's writers that read a server's SSE answer as
// it is written (taskIDWriter, listenSink) share: the answer cut into
// lines, and a data line's message. Every MCP SDK and the gateway write a
// message on one data line.

// eachLine hands each whole line of *held (its end included) to each, in
// order, and keeps the rest in *held.
func eachLine(held *[]byte, each func(line []byte) error) error {
	for {
		nl := bytes.IndexByte(*held, '\n')
		if nl < 0 {
			return nil
		}
		if err := each((*held)[:nl+1]); err != nil {
			return err
		}
		*held = (*held)[nl+1:]
	}
}

// sseData is the message of an SSE data line: what follows "data:" and one
// space, without the line's end; !ok for another line.
func sseData(line []byte) (data []byte, ok bool) {
	data, ok = bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
	return bytes.TrimPrefix(data, []byte(" ")), ok
}
