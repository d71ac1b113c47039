package tests

// The REST face's storage: bounded work per list, bounded records per
// principal and in all, keyed names, records sealed for their place and
// version. Through real Caddy instances sharing a file_system storage, in
// front of the go-sdk legacy server (restLegacyServer) and the TypeScript
// SDK 2.x modern fixture.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// restRecord is the path of the one record of tool's call id in the
// file_system storage at store.
func restRecord(t *testing.T, store, tool, id string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(store, "mcp_gateway", "rest", "*", "calls", tool, id))
	if err != nil || len(m) != 1 {
		t.Fatalf("the record of %s/%s: %v %v", tool, id, m, err)
	}
	return m[0]
}

// storeBytes is the bytes of the files under dir.
func storeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// bigArgs are the arguments of a hello call of about 1000 KiB (its
// result repeats them).
var bigArgs = `{"arguments":{"name":"` + strings.Repeat("a", 1000<<10) + `"}}`

// restListHWMBound is the most a limit=1 list may raise the gateway's
// VmHWM, in KiB.
const restListHWMBound = 64 << 10

// TestRESTListMemory: a `limit=1` list over 100 records of 1000 KiB
// reads the few records that can be on its page, one at a time, and
// raises the gateway's VmHWM by at most 64 MiB (it read every record
// whole, and kept them, before trimming: +200 MiB and more). The figure
// is in BENCHMARKS.md; reproduce it with:
// go test -count=1 -run '^TestRESTListMemory$' -v ./tests/
func TestRESTListMemory(t *testing.T) {
	t.Parallel()
	var done atomic.Int32
	up := restLegacyServer(t, &done)
	gw, procs := restFleetIn(t, t.TempDir(), "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}",
		"\t\trest_max_bytes_per_principal 1GiB\n\t\trest_max_bytes 1GiB\n")
	key := map[string]string{"Idempotency-Key": "k"}
	const n = 100
	for i := range n {
		wantCall(t, restDo(t, "PUT", fmt.Sprintf("%s/api/tools/hello/calls/c%d", gw[0], i), key, bigArgs), http.StatusCreated, "success")
	}
	before := procs[0].memKiB(t)
	r := restDo(t, "GET", gw[0]+"/api/tools/hello/calls?limit=1", nil, "")
	after := procs[0].memKiB(t)
	var list struct {
		Calls []restCall `json:"calls"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &list) != nil || len(list.Calls) != 1 || list.Calls[0].ID != fmt.Sprintf("c%d", n-1) {
		t.Fatalf("limit=1: %s", r)
	}
	grew := after["VmHWM"] - before["VmHWM"]
	t.Logf("a limit=1 list over %d records of 1000 KiB: VmHWM %d → %d KiB (+%d)", n, before["VmHWM"], after["VmHWM"], grew)
	if grew > restListHWMBound {
		t.Errorf("VmHWM grew by %d KiB, want at most %d KiB", grew, restListHWMBound)
	}
	r = restDo(t, "GET", gw[1]+"/api/tools/hello/calls?limit=3&createdAfter=2000-01-01", nil, "")
	if json.Unmarshal(r.Body, &list) != nil || len(list.Calls) != 3 || list.Calls[2].ID != fmt.Sprintf("c%d", n-3) {
		t.Fatalf("limit=3 on the other instance: %s", r)
	}
}

// TestRESTPrincipalBound: 150 PUTs of 1000 KiB from one principal grow
// the storage by at most 100 MiB: rest_max_bytes_per_principal (64 MiB by
// default) refuses the rest with 429 before anything is stored or called,
// saying what frees room; a finished call's DELETE frees it (and the
// deleted record written back is refused where it was deleted). (Without the
// bound the storage grew by 2.6 times what was sent.) The figure is in
// BENCHMARKS.md; reproduce it with:
// go test -count=1 -run '^TestRESTPrincipalBound$' -v ./tests/
func TestRESTPrincipalBound(t *testing.T) {
	t.Parallel()
	var done atomic.Int32
	up := restLegacyServer(t, &done)
	store := t.TempDir()
	gw, _ := restFleetIn(t, store, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "")
	key := map[string]string{"Idempotency-Key": "k"}
	was := storeBytes(t, store)
	var made, refused int
	var refusal restResp
	for i := range 150 {
		r := restDo(t, "PUT", fmt.Sprintf("%s/api/tools/hello/calls/b%d", gw[i%2], i), key, bigArgs)
		switch r.Status {
		case http.StatusCreated:
			made++
		case http.StatusTooManyRequests:
			refused++
			refusal = r
		default:
			t.Fatalf("PUT %d: %s", i, r)
		}
	}
	grew := storeBytes(t, store) - was
	t.Logf("150 PUTs of 1000 KiB: %d made, %d refused (429); the storage grew by %d KiB", made, refused, grew>>10)
	if grew > 100<<20 || refused == 0 {
		t.Fatalf("the storage grew by %d KiB, %d PUTs refused", grew>>10, refused)
	}
	wantProblem(t, refusal, http.StatusTooManyRequests)
	if !strings.Contains(string(refusal.Body), "DELETE finished calls") || !strings.Contains(string(refusal.Body), "rest_call_ttl") {
		t.Fatalf("the refusal does not say what frees room: %s", refusal)
	}
	// The refused calls were not made: their ids are free.
	wantProblem(t, restDo(t, "GET", gw[0]+"/api/tools/hello/calls/b149", nil, ""), http.StatusNotFound)
	// A retried PUT of a call kept is answered, not refused.
	wantCall(t, restDo(t, "PUT", gw[1]+"/api/tools/hello/calls/b0", key, bigArgs), http.StatusOK, "success")
	// DELETE frees a finished call's room (and its id); then a new call
	// fits. The deleted record written back is refused where it was
	// deleted.
	rec := restRecord(t, store, "hello", "b0")
	kept, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if r := restDo(t, "DELETE", gw[1]+"/api/tools/hello/calls/b0", nil, ""); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %s", r)
	}
	wantProblem(t, restDo(t, "GET", gw[0]+"/api/tools/hello/calls/b0", nil, ""), http.StatusNotFound)
	if err := os.WriteFile(rec, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, restDo(t, "GET", gw[1]+"/api/tools/hello/calls/b0", nil, ""), http.StatusServiceUnavailable)
	if err := os.Remove(rec); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, restDo(t, "DELETE", gw[0]+"/api/tools/hello/calls/b0", nil, ""), http.StatusNotFound)
	wantCall(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/after", key, bigArgs), http.StatusCreated, "success")
}

// TestRESTStoreBound: invented principals (one Authorization value each)
// are refused by the whole store's bound (507, saying what frees room)
// once rest_max_records records are kept, and make no more folders.
func TestRESTStoreBound(t *testing.T) {
	t.Parallel()
	var done atomic.Int32
	up := restLegacyServer(t, &done)
	store := t.TempDir()
	gw, _ := restFleetIn(t, store, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "\t\trest_max_records 20\n")
	var made, full int
	var refusal restResp
	for i := range 40 {
		hdr := map[string]string{"Idempotency-Key": "k", "Authorization": fmt.Sprintf("Bearer invented-%d", i)}
		r := restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/x", hdr, `{"arguments":{"name":"x"}}`)
		switch r.Status {
		case http.StatusCreated:
			made++
		case http.StatusInsufficientStorage:
			full++
			refusal = r
		default:
			t.Fatalf("PUT %d: %s", i, r)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(store, "mcp_gateway", "rest", "*"))
	t.Logf("40 invented principals: %d made, %d refused (507), %d folders", made, full, len(dirs))
	if made > 20 || full < 20 || len(dirs) > 20 {
		t.Fatalf("%d made, %d refused, %d folders: want at most 20 made", made, full, len(dirs))
	}
	wantProblem(t, refusal, http.StatusInsufficientStorage)
	if !strings.Contains(string(refusal.Body), "rest_max_records") || !strings.Contains(string(refusal.Body), "DELETE finished calls") {
		t.Fatalf("the refusal does not say why, nor what frees room: %s", refusal)
	}
}

// TestRESTRecordPlace: the storage's names do not hold a plain digest of
// the principal (which would let whoever lists the storage test guessed
// passwords offline), and a record copied under another call id does not
// open there (it opened as that call).
func TestRESTRecordPlace(t *testing.T) {
	t.Parallel()
	var done atomic.Int32
	up := restLegacyServer(t, &done)
	store := t.TempDir()
	gw, _ := restFleetIn(t, store, "\t\tupstream "+up+" {\n\t\t\tera legacy\n\t\t}", "")
	const basic = "Basic YWxpY2U6cGFzc3dvcmQ=" // alice:password
	hdr := map[string]string{"Idempotency-Key": "k", "Authorization": basic}
	wantCall(t, restDo(t, "PUT", gw[0]+"/api/tools/hello/calls/m1", hdr, `{"arguments":{"name":"Ada"}}`), http.StatusCreated, "success")
	rec := restRecord(t, store, "hello", "m1")
	sum := sha256.Sum256([]byte(basic))
	if strings.Contains(rec, hex.EncodeToString(sum[:16])) {
		t.Fatalf("the record's path %s names the plain digest of the principal", rec)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(rec), "m2"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, restDo(t, "GET", gw[1]+"/api/tools/hello/calls/m2", hdr, ""), http.StatusNotFound)
	wantCall(t, restDo(t, "GET", gw[1]+"/api/tools/hello/calls/m1", hdr, ""), http.StatusOK, "success")
}

// TestRESTRecordWrittenBack: a call's record written back to an earlier
// round (by someone who can write to the storage) is refused by the
// instance that wrote the newer one (503), so the round already answered
// is not retried again (it was: the continuation ran twice). In front of
// the modern fixture, whose rounds are stateless. A call waiting for an
// answer is not deleted (409).
func TestRESTRecordWrittenBack(t *testing.T) {
	t.Parallel()
	store := t.TempDir()
	gw, _ := restFleetIn(t, store, "\t\tupstream "+startModernFixture(t)+" {\n\t\t\tera modern\n\t\t}", "")
	call := gw[0] + "/api/tools/plan_party/calls/p1"
	c := wantCall(t, restDo(t, "PUT", call, map[string]string{"Idempotency-Key": "k"}, `{"arguments":{"occasion":"picnic"}}`),
		http.StatusCreated, "awaitingElicitationResult")
	wantProblem(t, restDo(t, "DELETE", call, nil, ""), http.StatusConflict) // not ended: cancel it first
	rec := restRecord(t, store, "plan_party", "p1")
	first, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	answer := `{"action":"accept","content":{"name":"Ada"}}`
	wantCall(t, restDo(t, "POST", call+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`}, answer), http.StatusOK, "awaitingSamplingResult")
	if err := os.WriteFile(rec, first, 0o600); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, restDo(t, "POST", call+"/advance", map[string]string{"If-Match": `"` + c.ETag + `"`}, answer), http.StatusServiceUnavailable)
	wantProblem(t, restDo(t, "GET", call, nil, ""), http.StatusServiceUnavailable)
}
