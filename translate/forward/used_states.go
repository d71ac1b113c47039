package forward

import (
	"crypto/sha256"
	"encoding/base64"
)

// A resumable requestState names no table entry that its first use could
// take, so Bridge.used (a seal.ReplayFilter, the one the forwarding header's
// nonces use too) is what makes it single use on the instance: each state
// is remembered until it expires. Another instance sharing the key does not
// know of it (docs/security.md: what a replay elsewhere can and cannot do).

// maxUsedStates bounds the filter: some 100 bytes per state with the map
// and the heap, 10 MiB when full. Full, the states expiring soonest are
// forgotten and states as old refused (a retry then starts over), while
// fresh ones pass.
const maxUsedStates = 100_000

// stateID is what the filter remembers of a state: a hash of its bytes, not
// of its text, since base64 has several texts for one token (the unused
// bits of its last character), and each would open.
func stateID(token string) [16]byte {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		raw = []byte(token)
	}
	sum := sha256.Sum256(raw)
	return [16]byte(sum[:16])
}
