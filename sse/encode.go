package sse

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidField is returned (wrapped) when an event or comment cannot be
// encoded faithfully: an ID with CR, LF or NUL, a type or comment with CR or
// LF, or a negative retry. Nothing is written in that case.
var ErrInvalidField = errors.New("sse: invalid field value")

// appendEvent appends the wire form of ev to dst. An event with no field at
// all encodes to nothing.
func appendEvent(dst []byte, ev Event) ([]byte, error) {
	if ev.HasID && strings.ContainsAny(ev.ID, "\r\n\x00") {
		return dst, fmt.Errorf("%w: id %q contains CR, LF or NUL", ErrInvalidField, ev.ID)
	}
	if strings.ContainsAny(ev.Type, "\r\n") {
		return dst, fmt.Errorf("%w: event type %q contains CR or LF", ErrInvalidField, ev.Type)
	}
	if ev.HasRetry && ev.Retry < 0 {
		return dst, fmt.Errorf("%w: negative retry %d", ErrInvalidField, ev.Retry)
	}
	hasData := ev.HasData || len(ev.Data) > 0
	if !ev.HasID && ev.Type == "" && !ev.HasRetry && !hasData {
		return dst, nil
	}
	if ev.HasID {
		dst = appendField(dst, "id", ev.ID)
	}
	if ev.Type != "" {
		dst = appendField(dst, "event", ev.Type)
	}
	if ev.HasRetry {
		dst = append(dst, "retry: "...)
		dst = strconv.AppendInt(dst, int64(ev.Retry), 10)
		dst = append(dst, '\n')
	}
	if hasData {
		dst = appendData(dst, ev.Data)
	}
	return append(dst, '\n'), nil
}

// appendField appends "name: value\n", or "name:\n" for an empty value.
func appendField[S string | []byte](dst []byte, name string, value S) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':')
	if len(value) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, value...)
	}
	return append(dst, '\n')
}

// appendData appends one "data:" line per line of data, treating CRLF, LF
// and a lone CR alike as line breaks, so no line break reaches the wire
// inside a field.
func appendData(dst, data []byte) []byte {
	for {
		i := lineEnd(data)
		if i < 0 {
			return appendField(dst, "data", data)
		}
		dst = appendField(dst, "data", data[:i])
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// appendComment appends ": text\n\n" (":\n\n" for empty text).
func appendComment(dst []byte, text string) ([]byte, error) {
	if strings.ContainsAny(text, "\r\n") {
		return dst, fmt.Errorf("%w: comment %q contains CR or LF", ErrInvalidField, text)
	}
	dst = appendField(dst, "", text)
	return append(dst, '\n'), nil
}
