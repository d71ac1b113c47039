package jsonrpc

import (
	"github.com/tidwall/gjson"
)

// Member is one member of a JSON object as listed by members. Offsets
// are relative to the start of the object text.
type Member struct {
	Name string       // unescaped member name
	Key  string       // the name as written, quotes included
	Val  gjson.Result // the value; val.Index is its offset
}

// End returns the offset just past the member's value.
func (m Member) End() int { return m.Val.Index + len(m.Val.Raw) }

// Members lists the members of obj, which must be valid JSON starting with
// '{', in order, and returns the first repeated name ("" if none).
func Members(obj string) ([]Member, string) {
	ms := make([]Member, 0, 4)
	dup := ""
	var seen nameSet
	gjson.Parse(obj).ForEach(func(k, v gjson.Result) bool {
		if dup == "" && !seen.add(k.Str) {
			dup = k.Str
		}
		ms = append(ms, Member{Name: k.Str, Key: k.Raw, Val: v})
		return true
	})
	return ms, dup
}

// ObjectHas reports whether the JSON object obj has a member called name.
func ObjectHas(obj, name string) bool {
	found := false
	gjson.Parse(obj).ForEach(func(k, _ gjson.Result) bool {
		found = k.Str == name
		return !found
	})
	return found
}

// InsertMember returns where and what to insert into the JSON object obj to
// add member (a complete `"name":value` text) when obj has no member called
// name; ok is false when it has one.
func InsertMember(obj, name, member string) (at int, text string, ok bool) {
	ms, _ := Members(obj)
	for _, m := range ms {
		if m.Name == name {
			return 0, "", false
		}
	}
	sp := AppendMembers(obj, ms, []string{member})
	return sp.At, sp.Text, true
}

// AppendMembers returns the splice that adds the given member texts at the
// End of the object obj, whose members are ms.
func AppendMembers(obj string, ms []Member, add []string) Splice {
	var b []byte
	at := 1 // just past '{'
	if len(ms) > 0 {
		at = ms[len(ms)-1].End()
		b = append(b, ',')
	}
	for i, a := range add {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, a...)
	}
	return Splice{at, at, string(b)}
}

// RemoveMembers re-writes the JSON object obj compactly without the members
// called one of names (every copy). Member values are copied verbatim.
func RemoveMembers(obj string, names ...string) string {
	ms, _ := Members(obj)
	b := make([]byte, 0, len(obj))
	b = append(b, '{')
outer:
	for _, m := range ms {
		for _, name := range names {
			if m.Name == name {
				continue outer
			}
		}
		b = AppendMember(b, m.Key, m.Val.Raw)
	}
	return string(append(b, '}'))
}

// AppendMember appends key:val to the JSON object being written at the end
// of b (opened with '{'), after a comma unless it is the first member.
func AppendMember(b []byte, key, val string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, key...)
	b = append(b, ':')
	return append(b, val...)
}

// Splice replaces src[at:end] with text (an insertion when at == end).
type Splice struct {
	At, End int
	Text    string
}

// SortSplices orders splices by position (insertion sort: there are few).
func SortSplices(sp []Splice) {
	for i := 1; i < len(sp); i++ {
		for j := i; j > 0 && sp[j].At < sp[j-1].At; j-- {
			sp[j], sp[j-1] = sp[j-1], sp[j]
		}
	}
}

// ApplySplices applies sorted, non-overlapping splices to src.
func ApplySplices(src string, sp []Splice) []byte {
	n := len(src)
	for _, s := range sp {
		n += len(s.Text) - (s.End - s.At)
	}
	b := make([]byte, 0, n)
	last := 0
	for _, s := range sp {
		b = append(b, src[last:s.At]...)
		b = append(b, s.Text...)
		last = s.End
	}
	return append(b, src[last:]...)
}
