//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package legacy

import "syscall"

// canPeek: peekOpen looks at the socket.
const canPeek = true

// peekOpen reports whether the socket fd has nothing to read and no end of
// stream: a peek that would block.
func peekOpen(fd uintptr) bool {
	var b [1]byte
	_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
}
