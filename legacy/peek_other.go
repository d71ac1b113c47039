//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package legacy

// canPeek: peekOpen cannot look at the socket (see body.WaitReadable).
const canPeek = false

// peekOpen cannot look at the socket here: an idle connection is assumed
// open, and a request that fails on it before any answer is sent again
// (see ConnClient.Do).
func peekOpen(uintptr) bool { return true }
