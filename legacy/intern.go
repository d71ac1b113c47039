package legacy

import (
	"unique"
	"unsafe"
)

// internInit returns raw, an upstream's InitializeResult, as bytes shared
// by every session whose upstream answered the same: a parked call keeps
// its session for the state's life, and at 10,000 of them one copy per
// session was ~150 bytes of each call's memory for the same few bytes.
// unique holds one copy while any session refers to it (and drops it
// after), so an upstream answering every session differently costs what
// copies did. The bytes must never be written to: they are a string's.
func internInit(raw string) []byte {
	v := unique.Make(raw).Value()
	return unsafe.Slice(unsafe.StringData(v), len(v))
}
