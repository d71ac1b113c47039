// Package legacy holds the gateway's side of the legacy MCP wire (protocol
// revisions 2025-11-25 and earlier): the sealed session ids that pin a legacy
// client to an upstream session, and the keyring that seals them. It does not
// import Caddy.
package legacy
