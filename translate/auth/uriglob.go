package auth

import (
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// A URI glob is path.Match's syntax, read for URIs, where '/' is only a
// character: '*' matches any run of characters, '/' included (so
// `file:///srv/*` covers every file below /srv, at any depth); '?' any one
// character; '[...]' one of a class ('[^...]' one not in it); '\' makes
// the next character literal (`\?` for a query's '?', `\*`, `\[`). A glob
// has no '{' or '}': a URI has none (RFC 3986), and a glob naming a
// template's `{var}` literally would hide the template but not the URIs it
// expands to; `*` covers both.

// checkURIGlob says why g is not a valid URI glob.
func checkURIGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("glob %q: %w", g, err)
	}
	if strings.ContainsAny(g, "{}") {
		return fmt.Errorf("glob %q: a URI glob has no '{' or '}': write '*' where a template has an expression", g)
	}
	return nil
}

// matchURI reports whether uri matches the URI glob g (checked by
// checkURIGlob). Every token of g but '*' matches one character, so when
// a token fails the last '*' takes one more character and matching goes
// on from there: O(len(g)·len(uri)) at worst, no recursion.
func matchURI(g, uri string) bool {
	gi, ui := 0, 0
	star, starU := -1, 0 // the last '*' seen, and where in uri its run ends
	for gi < len(g) || ui < len(uri) {
		if gi < len(g) {
			if g[gi] == '*' {
				star, starU = gi, ui
				gi++
				continue
			}
			if ui < len(uri) {
				if gw, uw, ok := matchOne(g[gi:], uri[ui:]); ok {
					gi, ui = gi+gw, ui+uw
					continue
				}
			}
		}
		if star < 0 || starU == len(uri) {
			return false
		}
		_, n := utf8.DecodeRuneInString(uri[starU:])
		starU += n
		gi, ui = star+1, starU
	}
	return true
}

// matchOne matches the token g starts with (not '*') against the
// character u starts with: their widths, and whether they match. A
// literal matches its own bytes, as in path.Match (an invalid UTF-8 byte
// only itself).
func matchOne(g, u string) (gw, uw int, ok bool) {
	switch g[0] {
	case '?':
		_, uw = utf8.DecodeRuneInString(u)
		return 1, uw, true
	case '[':
		r, uw := utf8.DecodeRuneInString(u)
		gw, ok := matchClass(g, r)
		return gw, uw, ok
	case '\\':
		_, n := utf8.DecodeRuneInString(g[1:])
		return 1 + n, n, strings.HasPrefix(u, g[1:1+n])
	}
	_, n := utf8.DecodeRuneInString(g)
	return n, n, strings.HasPrefix(u, g[:n])
}

// matchClass matches the class g starts with ('[' up to its ']') against
// r: its width in g, and whether r is in it.
func matchClass(g string, r rune) (int, bool) {
	i, negated, in := 1, false, false
	if i < len(g) && g[i] == '^' {
		negated, i = true, i+1
	}
	char := func() rune { // a character of the class, escaped or not
		if i < len(g) && g[i] == '\\' {
			i++
		}
		c, n := utf8.DecodeRuneInString(g[i:])
		i += n
		return c
	}
	for i < len(g) && g[i] != ']' {
		lo := char()
		hi := lo
		if i < len(g) && g[i] == '-' {
			i++
			hi = char()
		}
		in = in || lo <= r && r <= hi
	}
	return i + 1, in != negated
}
