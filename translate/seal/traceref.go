package seal

import (
	"bytes"
	"encoding/hex"
	"errors"
)

// This file is the trace reference the tokens and records of a call carry
// (a resumable requestState, a taskId and a task record, a sagaToken, a
// turn token, a REST call record): the span of the call's first request,
// which the spans of its later requests link to, on whichever instance
// serves them.

// TraceRef names the span of a call's first request (a W3C trace id, span
// id and trace flags), which its later rounds link to. Its zero value
// names none.
type TraceRef struct {
	TraceID [16]byte
	SpanID  [8]byte
	Flags   byte
}

// append appends t to a binary plaintext: nothing for the zero TraceRef
// (the codecs seal a state without one as before the trace existed).
func (t TraceRef) append(b []byte) []byte {
	if t == (TraceRef{}) {
		return b
	}
	b = append(b, t.TraceID[:]...)
	b = append(b, t.SpanID[:]...)
	return append(b, t.Flags)
}

// traceRef reads a TraceRef append wrote: a version that has one has a
// TraceRef that names a span, never the zero one.
func (d *resumeDecoder) traceRef() TraceRef {
	var t TraceRef
	d.fixed(t.TraceID[:])
	d.fixed(t.SpanID[:])
	var flags [1]byte
	d.fixed(flags[:])
	t.Flags = flags[0]
	if d.err == nil && t == (TraceRef{}) {
		d.err = errMalformedState // written only with a trace
	}
	return t
}

// errTraceText is a TraceRef's text that is not one MarshalText writes.
var errTraceText = errors.New("seal: malformed trace reference")

// MarshalText writes t as a W3C traceparent's ids and flags in lowercase
// hex: trace id, span id, flags, joined by '-' (a REST call record's
// JSON).
func (t TraceRef) MarshalText() ([]byte, error) {
	b := make([]byte, 0, 2*traceSize+2)
	b = hex.AppendEncode(b, t.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, t.SpanID[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{t.Flags}), nil
}

// UnmarshalText reads what MarshalText writes, of a TraceRef that names a
// span.
func (t *TraceRef) UnmarshalText(b []byte) error {
	var r TraceRef
	var flags [1]byte
	if len(b) != 2*traceSize+2 || b[32] != '-' || b[49] != '-' ||
		hexInto(r.TraceID[:], b[:32]) != nil || hexInto(r.SpanID[:], b[33:49]) != nil || hexInto(flags[:], b[50:]) != nil {
		return errTraceText
	}
	r.Flags = flags[0]
	if r == (TraceRef{}) || bytes.ContainsAny(b, "ABCDEF") {
		return errTraceText // zero, or uppercase hex: not what MarshalText writes
	}
	*t = r
	return nil
}

// hexInto decodes src, exactly len(dst) bytes of hex, into dst.
func hexInto(dst, src []byte) error {
	if n, err := hex.Decode(dst, src); err != nil || n != len(dst) {
		return errTraceText
	}
	return nil
}
