package seal

import "fmt"

// serverKeysPurpose derives the keyring of one server of a federated block.
const serverKeysPurpose Purpose = "mcp-gateway/server-keys/v1/"

// ForServer returns the keyring of the server named name in a block of
// several servers: each of kr's keys derived (HKDF-SHA256, the server's
// name in the info), in kr's order. Everything a server's part of the
// gateway seals (requestStates, taskIds, session pins, task records and
// their storage names) opens only under its own keyring, so that a token
// one server's calls handed out can never reach another server's, whatever
// a client puts next to it.
func (kr *Keyring) ForServer(name string) (*Keyring, error) {
	macs := kr.MACKeys(serverKeysPurpose + Purpose(name))
	keys := make([][]byte, len(macs))
	for i, m := range macs {
		keys[i] = m.Key
	}
	out, err := NewKeyring(keys...)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", name, err)
	}
	return out, nil
}

// ID is the KeyID of the key kr seals with: two keyrings with one ID seal
// alike.
func (kr *Keyring) ID() uint32 { return kr.keys[0].id }
