package legacy

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// What an upstream failure means for sending the request again elsewhere.

// Refused reports whether err means the connection to the upstream could
// not be made (the dial failed: refused, unreachable, timed out): nothing of
// the request left the gateway.
func Refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// Dropped reports whether err means the upstream closed or reset the
// connection before its answer was complete. The request may have reached
// it: only one that is safe to send twice (initialize) may be.
func Dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
