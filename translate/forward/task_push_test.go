package forward

import (
	"net/http"
	"slices"
	"testing"

	"github.com/caddyserver/certmagic"

	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/jsonrpc"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate"
	"github.com/caddy-mcp-gateway/caddy-mcp-gateway/translate/seal"
)

// TestWatchTasksBounds attacks the listen's task filter: taskIds of
// another principal, another keyring's, a 2025 upstream's task, malformed
// or repeated are not accepted; past max_listen_task_ids the rest are left out of the ack; a
// listen naming taskIds without the Tasks extension is refused with
// -32021; past max_task_listeners_per_principal a principal's next listen
// is refused (429) while another principal's passes, until one closes;
// without a task store another instance's task cannot be followed.
func TestWatchTasksBounds(t *testing.T) {
	kr, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	other, err := seal.NewKeyring(seal.NewRandomKey())
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.Keyring, o.Instance = kr, "gw-0"
	o.Tasks.Store = &certmagic.FileStorage{Path: t.TempDir()}
	o.Tasks.MaxListenTaskIDs, o.Tasks.MaxTaskListenersPerPrincipal = 3, 1
	opts := o.Ready()
	b := New(nil, o)
	alice, bob := [16]byte{1}, [16]byte{2}
	taskID := func(kr *seal.Keyring, princ [16]byte, n byte) string {
		return seal.SealTask(kr, seal.Task{Instance: "gw-1", Handle: [16]byte{n}, Principal: princ})
	}
	// A 2025 upstream's task, held here: its end is never pushed.
	theirs := seal.SealTask(kr, seal.Task{Instance: "gw-0", Handle: [16]byte{7}, Principal: alice, Upstream: "task-1", Session: "sess-1"})
	b.tasks[[16]byte{7}] = &task{handle: [16]byte{7}, princ: alice}
	mine := []string{taskID(kr, alice, 1), taskID(kr, alice, 2), taskID(kr, alice, 3), taskID(kr, alice, 4)}
	asked := `{"notifications":{"taskIds":[` + quoted(taskID(kr, bob, 9)) + `,` + quoted(taskID(other, alice, 8)) + `,` + quoted(theirs) + `,17,"nonsense",` +
		quoted(mine[0]) + `,` + quoted(mine[0]) + `,` + quoted(mine[1]) + `,` + quoted(mine[2]) + `,` + quoted(mine[3]) + `]}}`
	listen := func(princ [16]byte, caps string) (*taskWatch, *jsonrpc.RPCError) {
		return b.watchTasks(Request{Principal: princ, Options: opts, ModernRequest: &translate.ModernRequest{ClientCapabilities: []byte(caps)}}, []byte(asked))
	}
	const declared = `{"extensions":{"` + ExtTasks + `":{}}}`

	if _, rerr := listen(alice, `{}`); rerr == nil || rerr.Code != jsonrpc.MissingRequiredClientCapability || rerr.HTTPStatus != http.StatusBadRequest {
		t.Fatalf("without the extension: %+v, want -32021", rerr)
	}
	w, rerr := listen(alice, declared)
	if rerr != nil || !slices.Equal(w.acceptedIDs(), mine[:3]) {
		t.Fatalf("accepted %v (%+v), want alice's first three, once each", w.acceptedIDs(), rerr)
	}
	if _, rerr := listen(alice, declared); rerr == nil || rerr.HTTPStatus != http.StatusTooManyRequests {
		t.Fatalf("alice's second listen: %+v, want 429", rerr)
	}
	if wb, rerr := listen(bob, declared); rerr != nil || wb == nil || len(wb.acceptedIDs()) != 1 {
		t.Fatalf("bob's listen: %v %+v, want his one task", wb.acceptedIDs(), rerr)
	} else {
		wb.close()
	}
	w.close()
	w, rerr = listen(alice, declared)
	if rerr != nil || w == nil {
		t.Fatalf("alice's listen after she closed hers: %+v", rerr)
	}
	w.close()

	noStore := DefaultOptions()
	noStore.Keyring, noStore.Instance = kr, "gw-0"
	if w, rerr := b.watchTasks(Request{Principal: alice, Options: noStore.Ready(), ModernRequest: &translate.ModernRequest{ClientCapabilities: []byte(declared)}}, []byte(asked)); w != nil || rerr != nil {
		t.Fatalf("without a task store, another instance's tasks: %v %+v, want none accepted", w.acceptedIDs(), rerr)
	}
}

func quoted(s string) string { return `"` + s + `"` }
