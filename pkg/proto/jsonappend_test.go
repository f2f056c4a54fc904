package proto

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The hand encoders must match encoding/json exactly: clients decode with
// it, and jq users see the same bytes either way.
func TestAppendMatchesEncodingJSON(t *testing.T) {
	val := "v\x00<>&\u2028\xff\"\\\n"
	recs := []StateRecord{
		{Type: RecordState, Agent: "ops", Key: "notes/today.md", Size: 12, Modified: time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)},
		{Type: RecordState, Agent: "a", Key: "k\t\"x\"", Size: -1, Modified: time.Unix(0, 0).UTC(), Value: &val, Encoding: "base64", Deleted: true},
		{Type: RecordState, Agent: "a", Key: "ключ", Modified: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))},
	}
	for _, r := range recs {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(&r)
		got := AppendStateRecord(nil, &r)
		if string(got) != string(bytes.TrimSpace(want.Bytes())) {
			t.Errorf("\n got %s\nwant %s", got, want.Bytes())
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain")
	f.Add("\x00\x1f\"\\\u2028\xff<")
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(s)
		if got := AppendString(nil, s); string(got) != string(bytes.TrimSpace(want.Bytes())) {
			t.Fatalf("%q: got %s want %s", s, got, want.Bytes())
		}
	})
}
