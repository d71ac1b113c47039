package seal

// ownerPurpose seals the owner tags of in-line request ids.
const ownerPurpose Purpose = "mcp-gateway/owner/v1"

// SealOwner seals the owner of a round (its instance id and advertised
// address) into a tag for in-line request ids, which clients see: the
// sealing keeps them from pointing another instance at an address of
// their choosing. Plaintext: len(instance)(1) | instance | address.
func SealOwner(kr *Keyring, instance, address string) string {
	b := make([]byte, 0, 1+len(instance)+len(address))
	b = append(b, byte(len(instance)))
	b = append(b, instance...)
	b = append(b, address...)
	return kr.Seal(ownerPurpose, b)
}

// OpenOwner opens a tag made by SealOwner.
func OpenOwner(kr *Keyring, tag string) (instance, address string, ok bool) {
	if tag == "" || len(tag) > 1024 {
		return "", "", false
	}
	b, err := kr.Open(ownerPurpose, tag)
	if err != nil || len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", "", false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), string(b[1+n:]), true
}
