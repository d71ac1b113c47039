package seal

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testRecord() TaskRecord {
	return TaskRecord{
		Handle: [16]byte{1, 2}, Principal: testPrincipal, Tool: "legacy_multi_round", Upstream: "http://127.0.0.1:9000/mcp",
		Status: "input_required", Note: "", Created: time.UnixMilli(testNow.UnixMilli() - 5000), Updated: time.UnixMilli(testNow.UnixMilli()),
		TTL: time.Hour, PollMs: 1000,
		Inputs: []TaskInput{{ID: []byte(`3`), Key: "elicitation-1", Method: "elicitation/create", Params: []byte(`{"message":"name?"}`)}},
		Owner:  "gw-a", Boot: [16]byte{7}, Address: "http://10.0.0.1:8080",
		Session: "S3SS10N", Version: "2025-11-25", CallID: []byte(`"gw-7"`), After: "stream_3", Seen: 1,
		Keys: []byte{1, 2, 3}, ServerInfo: []byte(`{"name":"s","version":"1"}`),
	}
}

func TestTaskRecordRoundTrip(t *testing.T) {
	kr := testKeyring(t)
	done := testRecord()
	done.Status, done.Inputs, done.Result = "completed", nil, []byte(`{"content":[]}`)
	failed := testRecord()
	failed.Status, failed.Inputs, failed.Error, failed.Session, failed.CallID = "failed", nil, []byte(`{"code":-32603,"message":"x"}`), "", nil
	for _, r := range []TaskRecord{testRecord(), done, failed, {Created: time.UnixMilli(0), Updated: time.UnixMilli(0)}} {
		sealed, err := SealTaskRecord(kr, r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := OpenTaskRecord(kr, sealed)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

// TestTaskRecordRefused: a record beyond its bounds is not sealed; one
// tampered with, sealed for another purpose or under another key, does not
// open.
func TestTaskRecordRefused(t *testing.T) {
	kr := testKeyring(t)
	big := testRecord()
	big.Result = bytes.Repeat([]byte{'x'}, MaxRecordPayload+1)
	if _, err := SealTaskRecord(kr, big); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("a result beyond the bound: %v", err)
	}
	long := testRecord()
	long.Owner = strings.Repeat("o", MaxRecordShort+1)
	if _, err := SealTaskRecord(kr, long); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("an owner beyond the bound: %v", err)
	}
	sealed, err := SealTaskRecord(kr, testRecord())
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)/2] ^= 1
	other, _ := NewKeyring(NewRandomKey())
	for name, b := range map[string][]byte{
		"tampered":        tampered,
		"another key":     sealed,
		"another purpose": []byte(SealTask(kr, Task{Instance: "gw-a"})),
		"garbage":         []byte("not a record"),
	} {
		ring := kr
		if name == "another key" {
			ring = other
		}
		if _, err := OpenTaskRecord(ring, b); !errors.Is(err, ErrRecordInvalid) {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// FuzzDecodeTaskRecord: the decoder accepts exactly what encode produces
// (a decoded plaintext encodes back to itself) and never panics.
func FuzzDecodeTaskRecord(f *testing.F) {
	r := testRecord()
	f.Add(r.encode(nil))
	r.Trace = testTrace
	f.Add(r.encode(nil))
	f.Add((&TaskRecord{}).encode(nil))
	f.Add([]byte{taskRecordVersion, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeTaskRecord(b)
		if err != nil {
			return
		}
		if err := r.check(); err != nil {
			t.Fatalf("decoded a record beyond the bounds: %v", err)
		}
		if got := r.encode(nil); !bytes.Equal(got, b) {
			t.Fatalf("re-encoded %x, decoded from %x", got, b)
		}
	})
}
