package auth

import (
	"encoding/json"
	"strings"
)

// WellKnownPath is the prefix of a protected resource's metadata path
// (RFC 9728 §3.1): the resource's own path follows it.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// Challenge is the `WWW-Authenticate` value of a 401: where the resource's
// metadata is, and, when a token was presented and refused,
// `error="invalid_token"`.
func Challenge(metadataURL string, invalid bool) string {
	s := `Bearer resource_metadata="` + quote(metadataURL) + `"`
	if invalid {
		s += `, error="invalid_token"`
	}
	return s
}

// ScopeChallenge is the `WWW-Authenticate` value of a 403 for a token
// without the scopes needed.
func ScopeChallenge(metadataURL string, scopes []string) string {
	return `Bearer resource_metadata="` + quote(metadataURL) + `", error="insufficient_scope", scope="` + quote(strings.Join(scopes, " ")) + `"`
}

// quote escapes s for a quoted-string.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)
}

// Metadata is a Protected Resource Metadata document (RFC 9728 §2).
type Metadata struct {
	Resource               string   `json:"resource"`
	AuthorizationServers   []string `json:"authorization_servers"`
	ScopesSupported        []string `json:"scopes_supported,omitempty"`
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
}

// MetadataDocument is the JSON document served for a resource protected
// by issuer, naming the scopes it may ask for. Only the `Authorization`
// header carries tokens (no query or form parameter).
func MetadataDocument(resource, issuer string, scopes []string) []byte {
	b, _ := json.Marshal(Metadata{
		Resource: resource, AuthorizationServers: []string{issuer},
		ScopesSupported: scopes, BearerMethodsSupported: []string{"header"},
	})
	return b
}

// MetadataPath is where the metadata of a resource at path is served.
func MetadataPath(path string) string {
	if path == "/" {
		path = ""
	}
	return WellKnownPath + path
}
