package proto

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
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
		if got := AppendBytes(nil, []byte(s)); string(got) != string(bytes.TrimSpace(want.Bytes())) {
			t.Fatalf("bytes %q: got %s want %s", s, got, want.Bytes())
		}
	})
}

// TestAppendStringEveryPosition puts each byte that needs care at each
// place of a string longer than two words, so that it falls in every
// lane of the 8-byte test, at a word's edge, and in the tail after the
// last whole word; a rune also straddles the word's edge.
func TestAppendStringEveryPosition(t *testing.T) {
	specials := []string{"\x00", "\x1f", "\x20", "\"", "\\", "\x7f", "\x80", "\xff", "\n", "é", "\u2028", "\u2029", "€", "\U0001F600", "!", "#", "[", "]"}
	base := strings.Repeat("abcdefgh", 3) + "xyz"
	for _, sp := range specials {
		for i := 0; i <= len(base); i++ {
			s := base[:i] + sp + base[i:]
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			enc.Encode(s)
			w := string(bytes.TrimSpace(want.Bytes()))
			if got := AppendString(nil, s); string(got) != w {
				t.Fatalf("%q: got %s want %s", s, got, w)
			}
			if got := AppendBytes([]byte("x"), []byte(s)); string(got) != "x"+w {
				t.Fatalf("bytes %q: got %s want x%s", s, got, w)
			}
		}
	}
}

// FuzzParseStateRecord: what the hand parser accepts, encoding/json reads
// the same way; it may only decline, never differ. The records the server
// writes for plain keys and values are taken.
func FuzzParseStateRecord(f *testing.F) {
	val := "some text"
	for _, r := range []StateRecord{
		{Type: RecordState, Agent: "ops", Key: "notes/today.md", Size: 12, Modified: time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC), Value: &val},
		{Type: RecordState, Agent: "a", Key: "k", Size: 0, Modified: time.Unix(0, 0).UTC(), Value: &val, Encoding: "base64", Deleted: true},
		{Type: RecordState, Agent: "a", Key: "ключ", Modified: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))},
	} {
		b := AppendStateRecord(nil, &r)
		var got StateRecord
		if !ParseStateRecord(b, &got) {
			f.Fatalf("declined %s", b)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"type":"state","agent":"a","key":"k","size":-0,"modified":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"type":"state","agent":"a","key":"k","size":1,"modified":"2026-01-02T03:04:05Z","value":"\u0041"}`))
	f.Add([]byte(`{"type":"state","agent":"a","key":"k","size":1,"modified":"2026-01-02T03:04:05Z"} `))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast StateRecord
		if !ParseStateRecord(b, &fast) {
			return
		}
		var slow StateRecord
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("fast path took %s, encoding/json refuses it: %v", b, err)
		}
		if fast.Type != slow.Type || fast.Agent != slow.Agent || fast.Key != slow.Key || fast.Size != slow.Size ||
			!fast.Modified.Equal(slow.Modified) || fast.Modified.Location().String() != slow.Modified.Location().String() ||
			(fast.Value == nil) != (slow.Value == nil) || fast.Value != nil && *fast.Value != *slow.Value ||
			fast.Encoding != slow.Encoding || fast.Deleted != slow.Deleted {
			t.Fatalf("%s: fast %+v, slow %+v", b, fast, slow)
		}
	})
}

// The record of a known agent and key reads the same as without them.
func FuzzParseStateRecordOf(f *testing.F) {
	v := "hello"
	good := AppendStateRecord(nil, &StateRecord{Type: "state", Agent: "ops", Key: "k/1", Size: 5, Modified: time.Unix(1700000000, 123).UTC(), Value: &v})
	f.Add(good, "ops", "k/1")
	f.Add(good, "other", "k")
	f.Add([]byte(`{"type":"state","agent":"a\n","key":"k","size":0,"modified":"2024-01-01T00:00:00Z","encoding":"base64","deleted":true}`), `a\n`, "k")
	f.Add([]byte(`{"type":"state","agent":"a","key":"k","size":-0,"modified":"2024-01-01T00:00:00Z"}`), "a", "k")
	f.Fuzz(func(t *testing.T, b []byte, agent, key string) {
		var got, want StateRecord
		ok := ParseStateRecordOf(b, &got, agent, key)
		wok := ParseStateRecord(b, &want)
		if ok != wok {
			t.Fatalf("%q: ok %v, without the known strings %v", b, ok, wok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %+v\nwithout the known strings %+v", b, got, want)
		}
	})
}
