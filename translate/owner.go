package translate

import (
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/legacy"
)

// Owner is the gateway instance that holds a parked call (forward bridge)
// or a round waiting for a legacy client's answers (reverse bridge).
type Owner struct {
	// Instance is the owner's instance id.
	Instance string
	// Address is the owner's advertised base URL, taken only from sealed
	// data ("" when the owner advertises none, or when what named it did
	// not open): a client can never choose it.
	Address string
}

// ownerPurpose seals the owner tags of in-line request ids.
const ownerPurpose legacy.Purpose = "mcp-gateway/owner/v1"

// sealOwner seals o into a tag for in-line request ids, which clients see:
// the sealing keeps them from pointing another instance at an address of
// their choosing. Plaintext: len(instance)(1) | instance | address.
func sealOwner(kr *legacy.Keyring, o Owner) string {
	b := make([]byte, 0, 1+len(o.Instance)+len(o.Address))
	b = append(b, byte(len(o.Instance)))
	b = append(b, o.Instance...)
	b = append(b, o.Address...)
	return kr.Seal(ownerPurpose, b)
}

// openOwner opens a tag made by sealOwner.
func openOwner(kr *legacy.Keyring, tag string) (Owner, bool) {
	if tag == "" || len(tag) > 1024 {
		return Owner{}, false
	}
	b, err := kr.Open(ownerPurpose, tag)
	if err != nil || len(b) < 1 || len(b) < 1+int(b[0]) {
		return Owner{}, false
	}
	n := int(b[0])
	return Owner{Instance: string(b[1 : 1+n]), Address: string(b[1+n:])}, true
}
