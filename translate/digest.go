package translate

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
	"strconv"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/tidwall/gjson"
)

// This file computes what a requestState binds besides its call (the
// principal and the request, seal.State), and what a forwarding header
// carries of the principal: hashes of inputs only translate reads.

// PrincipalHash returns the first 16 bytes of the SHA-256 of principal,
// the form in which a seal.State binds its principal.
func PrincipalHash(principal string) [16]byte {
	sum := sha256.Sum256([]byte(principal))
	var h [16]byte
	copy(h[:], sum[:])
	return h
}

// RequestDigest digests a modern request's method and salient params, so
// that the state minted for one request does not resume another (SEP-2322
// server requirement 5). The salient params are:
//
//   - tools/call and prompts/get: name and arguments (absent or null
//     arguments count as {});
//   - resources/read: uri;
//   - any other method: all params except _meta, inputResponses and
//     requestState.
//
// Values are canonicalized first, so that a client re-serializing its retry
// keeps the digest: object keys sorted (by their unescaped UTF-8 bytes,
// recursively), no whitespace, strings compared by their unescaped text,
// numbers kept as written (1 and 1.0 differ). A missing value, null and
// every other value digest differently. params that is not valid JSON
// digests like absent params. The result is the first 16 bytes of a
// domain-separated SHA-256.
func RequestDigest(method string, params []byte) [16]byte {
	h := sha256.New()
	h.Write([]byte("mcp-gateway/request-digest/v1\x00"))
	writeField(h, []byte(method))
	var p gjson.Result
	if jsonrpc.ValidJSON(params) == nil {
		p = gjson.ParseBytes(params)
	}
	var c canonicalizer
	switch method {
	case "tools/call", "prompts/get":
		c.field(h, p.Get("name"))
		args := p.Get("arguments")
		if !args.Exists() || args.Type == gjson.Null {
			args = gjson.Parse("{}") // no arguments mean empty arguments
		}
		c.field(h, args)
	case "resources/read":
		c.field(h, p.Get("uri"))
	default:
		if p.IsObject() {
			c.buf = c.object(c.buf[:0], p, 0, "_meta", "inputResponses", "requestState")
			writeField(h, c.buf)
		} else {
			c.field(h, p)
		}
	}
	var d [16]byte
	copy(d[:], h.Sum(nil))
	return d
}

// writeField writes b length-prefixed, so that fields cannot run together.
func writeField(h hash.Hash, b []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
	h.Write(b)
}

// maxCanonicalDepth bounds recursion; deeper values are written as their
// raw text.
const maxCanonicalDepth = 256

// canonicalizer writes gjson values in canonical form.
type canonicalizer struct {
	buf []byte
}

// field writes v canonicalized, or an empty field when v does not exist
// (no JSON value has an empty canonical form).
func (c *canonicalizer) field(h hash.Hash, v gjson.Result) {
	c.buf = c.buf[:0]
	if v.Exists() {
		c.buf = c.value(c.buf, v, 0)
	}
	writeField(h, c.buf)
}

func (c *canonicalizer) value(b []byte, v gjson.Result, depth int) []byte {
	if depth > maxCanonicalDepth {
		return append(b, v.Raw...)
	}
	switch {
	case v.IsObject():
		return c.object(b, v, depth)
	case v.IsArray():
		b = append(b, '[')
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			if i > 0 {
				b = append(b, ',')
			}
			i++
			b = c.value(b, e, depth+1)
			return true
		})
		return append(b, ']')
	case v.Type == gjson.String:
		return strconv.AppendQuote(b, v.Str)
	default: // numbers as written, true, false, null
		return append(b, v.Raw...)
	}
}

func (c *canonicalizer) object(b []byte, v gjson.Result, depth int, skip ...string) []byte {
	type kv struct {
		k string
		v gjson.Result
	}
	var ms []kv
	v.ForEach(func(k, val gjson.Result) bool {
		if !slices.Contains(skip, k.Str) {
			ms = append(ms, kv{k.Str, val})
		}
		return true
	})
	slices.SortStableFunc(ms, func(a, b kv) int {
		switch {
		case a.k < b.k:
			return -1
		case a.k > b.k:
			return 1
		}
		return 0
	})
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, m.k)
		b = append(b, ':')
		b = c.value(b, m.v, depth+1)
	}
	return append(b, '}')
}
