// Package jsonrpc is the JSON-RPC 2.0 layer both protocol eras build on:
// the message envelope (Message, read leniently by ParseMessage and
// strictly by Peek), the error a client is answered with (RPCError,
// ErrorResponse and the error codes), the depth check every validation of
// untrusted JSON goes through (ValidJSON), and the splice editor that edits
// foreign JSON in place (Members, Splice, ApplySplices, …).
//
// It imports nothing of this module, so that legacy and translate can both
// build on it without either era's package depending on the other.
package jsonrpc
