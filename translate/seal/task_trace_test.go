package seal

import (
	"reflect"
	"testing"
)

// A taskId and a task record minted by the gateway before they carried a
// trace (at 4bf60db), under goldenKey: a hosted task's and an upstream's
// (2025 tasks) taskId, and testRecord's record.
const (
	goldenTask       = "AUJe1OSP436hS9QeSRccJgr62SQ-YyqrmpKkfKF9O8idcvV5OyzCOK1jnmI0-JIrAzwnjNPrVhVIe3x0N-jucjv3xdf6_dIACqZcac8AHZ4zQV51OD3GDLh20_4"
	goldenTask2025   = "AUJe1OTef9ZjwIbzXdln6HqDeLkw6-AvYw7AbmHhTgr3cUDqFRSXEowDthjoC0uqcgLu-sCN8lc-vcT6e61XE0P08zguXs-wbQ9lY5kDKMZoLMRX0IHA3UvAzX-8teIyt7wmoBPZb7Rh"
	goldenTaskRecord = "AUJe1ORPDWyN2El9omssM0oPCHvu7LBDsEzkfXVPSeWbmS3pImoJOqaj20dUOyKOwlaqNzwHrl_spVKI0Ni31-ku_anSc-PnJ9Bxq5sOas7Wy8VNBXvpb_iInMS9JXDdOsllQG3VKHgir1gWr_jOn9W5m3ojAmkeYqyJUTs_ZHlDKQ2g_iSARQnlMPUPU7omVeDNie0mXcjGnocmpigqZD-kjikYDEMp2P9yzeqpViuu_k6_noPMYBeIndx4kAGPDgL8fYj3KdpD8s2NxfRoIXPy85ycPgJ0BZx13Pf6f_bWXFd13gePLEQIhwtkrLsRitWgaDDsAljtGKl0ZQAmPY5hb8JdgEJqqK9WSNvasO9fCGS5826m4HB9j0AdICqsSjXpNhzW-PyKmVqVR3u2xiyRlD5YVJyl"
)

func goldenTasks() map[string]Task {
	hosted := Task{Instance: "gw-a", Address: "http://10.0.0.1:8080", Handle: [16]byte{1, 2, 3}, Principal: [16]byte{9, 8, 7}}
	upstream := hosted
	upstream.Upstream, upstream.Session = "up-task-1", "S1"
	return map[string]Task{goldenTask: hosted, goldenTask2025: upstream}
}

var testTrace = TraceRef{TraceID: [16]byte{0x4b, 0xf9}, SpanID: [8]byte{0, 0xf0, 0x67}, Flags: 1}

// TestTaskGoldenBeforeTrace: taskIds and records minted before the trace
// existed go on opening, and those without a trace are still sealed byte
// for byte as then, so that a fleet's older instances open them.
func TestTaskGoldenBeforeTrace(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	for golden, want := range goldenTasks() {
		got, err := OpenTask(kr, golden)
		if err != nil || got != want {
			t.Errorf("golden taskId %.20s…: %+v, %v", golden, got, err)
			continue
		}
		sameToken(t, kr, "taskId", taskPurpose, golden, SealTask(kr, want))
	}
	got, err := OpenTaskRecord(kr, []byte(goldenTaskRecord))
	if err != nil || !reflect.DeepEqual(got, testRecord()) {
		t.Fatalf("golden record: %+v, %v", got, err)
	}
	fresh, err := SealTaskRecord(kr, testRecord())
	if err != nil {
		t.Fatal(err)
	}
	sameToken(t, kr, "task record", taskRecordPurpose, goldenTaskRecord, string(fresh))
}

// TestTaskTrace: a taskId (of either kind) and a record with a trace are
// versions 3 and 4, and 2, and open with it; a plaintext of those versions
// whose trace is zero, or cut short, is refused.
func TestTaskTrace(t *testing.T) {
	kr, err := NewKeyring(goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range goldenTasks() {
		tk.Trace = testTrace
		got, err := OpenTask(kr, SealTask(kr, tk))
		if err != nil || got != tk {
			t.Errorf("taskId with a trace: %+v, %v; want %+v", got, err, tk)
		}
		plain, _ := kr.Open(taskPurpose, SealTask(kr, tk))
		if want := byte(taskTraceVersion); tk.Upstream != "" && plain[0] != task2025TraceVersion || tk.Upstream == "" && plain[0] != want {
			t.Errorf("version %d for %+v", plain[0], tk)
		}
		zero := append([]byte(nil), plain...)
		clear(zero[len(zero)-traceSize:])
		for name, bad := range map[string][]byte{"zero trace": zero, "cut short": plain[:len(plain)-1]} {
			if got, err := OpenTask(kr, kr.Seal(taskPurpose, bad)); err == nil {
				t.Errorf("taskId, %s: opened %+v", name, got)
			}
		}
	}
	r := testRecord()
	r.Trace = testTrace
	plain := r.encode(nil)
	if plain[0] != taskRecordTraceVersion {
		t.Errorf("record version %d, want %d", plain[0], taskRecordTraceVersion)
	}
	sealed, err := SealTaskRecord(kr, r)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := OpenTaskRecord(kr, sealed); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("record with a trace: %+v, %v", got, err)
	}
	zero := append([]byte(nil), plain...)
	clear(zero[len(zero)-traceSize:])
	for name, bad := range map[string][]byte{"zero trace": zero, "cut short": plain[:len(plain)-1]} {
		if got, err := OpenTaskRecord(kr, []byte(kr.Seal(taskRecordPurpose, bad))); err == nil {
			t.Errorf("record, %s: opened %+v", name, got)
		}
	}
}
