package proto

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// memoryRecords are records with each field set, unset and at its edges.
func memoryRecords() []MemoryRecord {
	created := time.Date(2026, 11, 27, 3, 4, 5, 120000000, time.UTC)
	exp := created.Add(90 * time.Minute)
	zone := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", -(5*3600+30*60)))
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	neg := time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	return []MemoryRecord{
		{Type: RecordMemory, ID: "m-01", Agent: "ops", Kind: "episodic", Created: created},
		{Type: RecordMemory, ID: "m-02", Agent: "ops", Kind: "working", Text: "disk <full> & \"quoted\"\n\ttab \u2028 ключ 🙂 \x01", Score: 0.123456789,
			Tags: []string{"a", "b<c>", ""}, Source: "cron", Created: created, Importance: 1, Expires: &exp, Forgotten: true},
		{Type: "", ID: "", Agent: "", Kind: "", Created: time.Time{}},
		{Type: RecordMemory, ID: "x", Agent: "a", Kind: "semantic", Score: 1e-7, Importance: 5e-324, Created: zone},
		{Type: RecordMemory, ID: "x", Agent: "a", Kind: "semantic", Score: -1e21, Importance: 123456789012345678901234.0, Created: created},
		{Type: RecordMemory, ID: "x", Agent: "a", Kind: "semantic", Score: 1e20, Importance: 0.000001, Created: created},
		{Type: RecordMemory, ID: "x", Agent: "a", Kind: "k", Tags: []string{}, Created: created},
		{Type: "mem\x7fory", ID: "\xff", Agent: "a", Kind: "k", Created: created},
		// encoding/json refuses these; so must the fast path.
		{Type: RecordMemory, Score: math.NaN(), Created: created},
		{Type: RecordMemory, Importance: math.Inf(-1), Created: created},
		{Type: RecordMemory, Created: far},
		{Type: RecordMemory, Created: neg},
		{Type: RecordMemory, Created: created, Expires: &far},
		{Type: RecordMemory, Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("far", 24*3600))},
	}
}

// The fast path writes what encoding/json writes, byte for byte, and
// refuses what it refuses.
func TestAppendMemoryRecordMatchesEncodingJSON(t *testing.T) {
	recs := memoryRecords()
	for i := range recs {
		r := &recs[i]
		want, werr := marshalJSON(r)
		got, ok := AppendMemoryRecord([]byte("prefix"), r)
		if werr != nil {
			if ok || string(got) != "prefix" {
				t.Errorf("record %d: encoding/json refuses it (%v), the fast path wrote %q", i, werr, got)
			}
			if _, err := Marshal(r); err == nil {
				t.Errorf("record %d: Marshal took what encoding/json refuses", i)
			}
			continue
		}
		if !ok || string(got) != "prefix"+string(want) {
			t.Errorf("record %d:\nfast %q (ok %v)\nwant %q", i, got, ok, want)
			continue
		}
		if m, _ := Marshal(r); string(m) != string(want) {
			t.Errorf("record %d: Marshal %q, want %q", i, m, want)
		}
		// And reads back as encoding/json reads it.
		var fast, slow MemoryRecord
		if err := json.Unmarshal(want, &slow); err != nil {
			t.Fatal(err)
		}
		if !ParseMemoryRecord(want, &fast) {
			t.Errorf("record %d: the fast path declines %s", i, want)
		} else if msg := sameMemoryRecord(&fast, &slow); msg != "" {
			t.Errorf("record %d: %s", i, msg)
		}
	}
	res := MemRememberResult{Memories: recs[:8]}
	want, _ := marshalJSON(&res)
	if got, ok := AppendMemRememberResult(nil, &res); !ok || string(got) != string(want) {
		t.Errorf("result:\nfast %q\nwant %q", got, want)
	}
	for _, res := range []MemRememberResult{{}, {Memories: []MemoryRecord{}}} {
		want, _ := marshalJSON(&res)
		if got, _ := Marshal(&res); string(got) != string(want) {
			t.Errorf("result %+v: %q, want %q", res, got, want)
		}
	}
	if _, err := Marshal(&MemRememberResult{Memories: recs[8:9]}); err == nil {
		t.Error("a result with a NaN score was written")
	}
}

// sameMemoryRecord says how a and b differ ("" for not at all); times are
// the same instant in a zone of the same name, as a decode gives them.
func sameMemoryRecord(a, b *MemoryRecord) string {
	sameTime := func(x, y time.Time) bool {
		return x.Equal(y) && x.Location().String() == y.Location().String()
	}
	x, y := *a, *b
	if !sameTime(x.Created, y.Created) || (x.Expires == nil) != (y.Expires == nil) ||
		x.Expires != nil && !sameTime(*x.Expires, *y.Expires) {
		return "times differ: " + x.Created.String() + " / " + y.Created.String()
	}
	x.Created, y.Created, x.Expires, y.Expires = time.Time{}, time.Time{}, nil, nil
	if !reflect.DeepEqual(x, y) {
		return "fields differ"
	}
	return ""
}

// A record the fast path takes reads as encoding/json reads it; the
// records AppendMemoryRecord writes are all taken.
func FuzzMemoryRecord(f *testing.F) {
	for _, r := range memoryRecords() {
		if b, ok := AppendMemoryRecord(nil, &r); ok {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"type":"memory","id":"a","agent":"b","kind":"c","score":-0,"created":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"type":"memory","id":"a","agent":"b","kind":"c","tags":[],"created":"2026-01-02T03:04:05+01:00","expires":"2026-01-02T03:04:05.1Z"}`))
	f.Add([]byte(`{"type":"memory","id":"\ud83d\ude42","agent":"b","kind":"c","created":"2026-01-02T03:04:05Z","forgotten":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast MemoryRecord
		if !ParseMemoryRecord(b, &fast) {
			return
		}
		var slow MemoryRecord
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("fast path took %s, encoding/json refuses it: %v", b, err)
		}
		if msg := sameMemoryRecord(&fast, &slow); msg != "" {
			t.Fatalf("%s: %s\nfast %+v\nslow %+v", b, msg, fast, slow)
		}
		var res MemRememberResult
		two := append(append(append([]byte(`{"memories":[`), b...), ','), b...)
		if !ParseMemRememberResult(append(two, ']', '}'), &res) || len(res.Memories) != 2 {
			t.Fatalf("a result of two %s was declined", b)
		}
	})
}

// The args written by hand are the args the daemon's fast path reads, and
// the args encoding/json reads.
func TestAppendMemRememberArgs(t *testing.T) {
	for _, a := range []MemRememberArgs{
		{Agent: "ops", Memories: []MemoryInput{{Text: "one"}}},
		{Agent: "ops", Memories: []MemoryInput{
			{Kind: "semantic", Text: "a <b> & \"c\"\n", Tags: []string{"x", "y"}, Source: "s", Importance: 0.5, TTL: "90m"},
			{Text: "ключ 🙂", Importance: 1e-9},
			{Text: "t", Tags: []string{}},
		}},
		{Agent: "a", Memories: []MemoryInput{}},
	} {
		b, ok := AppendMemRememberArgs(nil, &a)
		if !ok {
			t.Fatalf("%+v: declined", a)
		}
		var fast, slow MemRememberArgs
		if !fastRememberArgs(b, &fast) {
			t.Errorf("the daemon's fast path declines %s", b)
		}
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		for i := range slow.Memories {
			// omitempty: an empty list is not written, so reads as none.
			if len(a.Memories[i].Tags) == 0 {
				a.Memories[i].Tags = nil
			}
		}
		if !reflect.DeepEqual(fast, a) || !reflect.DeepEqual(slow, a) {
			t.Errorf("%s:\nfast %+v\nslow %+v\nwant %+v", b, fast, slow, a)
		}
		if n := memRememberArgsSize(&a); n < len(b) {
			t.Errorf("%s: sized %d, wrote %d", b, n, len(b))
		}
	}
	bad := MemRememberArgs{Agent: "a", Memories: []MemoryInput{{Text: "t", Importance: math.NaN()}}}
	if b, ok := AppendMemRememberArgs([]byte("x"), &bad); ok || string(b) != "x" {
		t.Errorf("a NaN importance was written: %q", b)
	}
}
