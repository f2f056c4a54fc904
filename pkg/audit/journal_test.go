package audit

import (
	"encoding/json"
	"testing"
	"time"
)

// An entry staged in a journal and lost by the log is appended again with
// the same hash; one the log has is skipped; a gap is refused.
func TestRestore(t *testing.T) {
	when := time.Date(2026, 1, 2, 3, 4, 5, 120, time.UTC)
	mk := func(seq uint64, target string) *Entry {
		return &Entry{Seq: seq, Time: when, Actor: Actor{UID: 1, PID: 7, Agent: "a", Run: "r1"}, Op: "state.save", Target: target, Args: ArgsDigest([]byte(target)), Result: "ok"}
	}
	// The acknowledged chain: three entries appended with their seqs.
	ref := open(t, t.TempDir(), Options{})
	var staged [][]byte
	for i, tgt := range []string{"a:1", "a:2", "a:3"} {
		e := mk(uint64(i+1), tgt)
		b := AppendStaged(nil, e) // as the journal holds it: before the log gave it prev and hash
		staged = append(staged, b)
		if err := ref.AppendAt([]*Entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	_, want := ref.Last()
	if err := ref.AppendAt([]*Entry{mk(9, "a:9")}); err == nil {
		t.Fatal("AppendAt of seq 9 after 3 did not fail")
	}
	ref.Close()

	// A log that lost the last two: the journal puts them back.
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	first, _ := ParseStaged(staged[0])
	if err := l.AppendAt([]*Entry{first}); err != nil {
		t.Fatal(err)
	}
	head := uint64(1)
	for i, b := range staged {
		e, err := ParseStaged(b)
		if err != nil {
			t.Fatal(err)
		}
		appended, err := l.Restore(e, head)
		if err != nil || appended != (i > 0) {
			t.Fatalf("entry %d: appended %v, %v", i+1, appended, err)
		}
		if appended {
			head = e.Seq
		}
	}
	if seq, hash := l.Last(); seq != 3 || hash != want {
		t.Fatalf("restored head %d %s, want 3 %s", seq, hash, want)
	}
	if _, err := l.Restore(mk(5, "a:5"), 3); err == nil {
		t.Fatal("a gap was restored")
	}
	if _, err := ParseStaged([]byte("{")); err == nil {
		t.Fatal("a torn record parsed")
	}
}

// AppendStaged writes what json.Marshal of the entry would give, as far
// as ParseStaged reads it back: every field of every kind of entry.
func TestAppendStagedRoundTrip(t *testing.T) {
	when := time.Date(2026, 11, 26, 17, 4, 5, 123456789, time.UTC)
	for _, e := range []*Entry{
		{Seq: 1, Time: when, Actor: Actor{UID: 0}, Op: "commit", Target: "*", Result: "ok"},
		{Seq: 2, Time: when.Truncate(time.Second), Actor: Actor{UID: 1000, PID: 42, Agent: "ops", Run: "r9"}, Op: "state.save",
			Target: "ops:notes/\"q\"\\ \u00e9\u202e\x01\n", Args: ArgsDigest([]byte("x")), Result: "EPERM"},
		{Seq: 3, Time: when, Actor: Actor{UID: 7, PID: -1}, Op: "state.load", Target: "web:k", Result: "EACCES",
			Count: 12, First: when.Add(-time.Minute), Last: when.Add(-time.Second)},
		{Seq: 1 << 40, Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Op: "", Target: "", Result: ""},
	} {
		var want Entry
		b, _ := json.Marshal(e)
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		want.Type = "audit"
		got, err := ParseStaged(AppendStaged(nil, e))
		if err != nil {
			t.Fatalf("%s: %v", AppendStaged(nil, e), err)
		}
		got.Prev = ""
		if !got.Time.Equal(want.Time) || !got.First.Equal(want.First) || !got.Last.Equal(want.Last) {
			t.Errorf("times: got %v %v %v, want %v %v %v", got.Time, got.First, got.Last, want.Time, want.First, want.Last)
		}
		got.Time, got.First, got.Last = want.Time, want.First, want.Last
		if *got != want {
			t.Errorf("staged entry read back as\n%+v\nwant\n%+v", *got, want)
		}
	}
}
