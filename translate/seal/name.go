package seal

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// This file names what the gateway keeps in storage for a principal (the
// REST face's records, task records): a keyed digest of the principal's
// hash, so that whoever can list the storage cannot test guessed
// credentials against the names offline, as they could against a plain
// digest of them.

// storageNamePurpose derives the key of principals' storage names.
const storageNamePurpose Purpose = "mcp-gateway/storage-name/v1"

// PrincipalName is the storage name of a principal (its hash,
// translate.PrincipalHash): 32 hex digits, the first half of an
// HMAC-SHA256 under a key derived from the keyring's first key. The same
// keyring (the same state_key) names a principal alike on every instance.
func (kr *Keyring) PrincipalName(principal [16]byte) string {
	return principalName(kr.names[0].Key, principal)
}

// PrincipalNamesBefore are the names an older gateway, or this keyring's
// other keys (before a rotation), gave principal: under each other key,
// then the plain hex of the hash (before names were keyed). A caller that
// misses a record at PrincipalName looks there.
func (kr *Keyring) PrincipalNamesBefore(principal [16]byte) []string {
	out := make([]string, 0, len(kr.names))
	for _, k := range kr.names[1:] {
		out = append(out, principalName(k.Key, principal))
	}
	return append(out, hex.EncodeToString(principal[:]))
}

func principalName(key []byte, principal [16]byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(principal[:])
	return hex.EncodeToString(m.Sum(nil)[:16])
}
