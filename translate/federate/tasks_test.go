package federate

import (
	"testing"
)

func TestTaskIDs(t *testing.T) {
	s := testSet(t)
	if w := WrapTaskID("jira", "786512e2:x"); w != "jira:786512e2:x" {
		t.Errorf("WrapTaskID = %q", w)
	}
	for _, tc := range []struct {
		wrapped string
		server  int
		id      string
		ok      bool
	}{
		{"jira:786512e2:x", 1, "786512e2:x", true},
		{"github:t1", 0, "t1", true},
		// Re-wrapped with another server's name: it goes to that server
		// (whose own check of its ids refuses another's task).
		{"files:t1", 2, "t1", true},
		{"t1", -1, "", false},        // no ':'
		{"gitlab:t1", -1, "", false}, // no such server
		{":t1", -1, "", false},
		{"jira:", -1, "", false},
		{"JIRA:t1", -1, "", false},
	} {
		i, id, ok := s.UnwrapTaskID(tc.wrapped)
		if i != tc.server || id != tc.id || ok != tc.ok {
			t.Errorf("UnwrapTaskID(%q) = %d %q %t", tc.wrapped, i, id, ok)
		}
	}
}

// TestWrapTaskIDs: the top-level taskId of a result is wrapped, the rest
// kept byte for byte.
func TestWrapTaskIDs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"resultType":"task","taskId":"786512e2","status":"working","ttlMs":60000}`,
			`{"resultType":"task","taskId":"jira:786512e2","status":"working","ttlMs":60000}`},
		{` { "taskId" : "a\"b" , "result":{"taskId":"nested"} } `,
			` { "taskId" : "jira:a\"b" , "result":{"taskId":"nested"} } `},
		{`{"taskId":"a","taskId":"b"}`, `{"taskId":"jira:a","taskId":"jira:b"}`},
		{`{"taskId":7}`, `{"taskId":7}`},
		{`{"status":"working"}`, `{"status":"working"}`},
		{`["taskId"]`, `["taskId"]`},
		{`{"taskId":"a"`, `{"taskId":"a"`},
		{``, ``},
	} {
		if got := WrapTaskIDs([]byte(tc.in), "jira"); string(got) != tc.want {
			t.Errorf("WrapTaskIDs(%s) = %s", tc.in, got)
		}
	}
}
