package memory

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

func sample() *Memory {
	t := time.Date(2026, 11, 22, 2, 36, 48, 123456789, time.UTC)
	return &Memory{ID: NewID(t), Kind: Episodic, Tags: []string{"nginx", "disk"}, Source: "journalctl -u nginx",
		Created: t, Importance: 0.5, Expires: t.Add(24 * time.Hour), Text: "disk full on /var\nsecond line\n"}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range []*Memory{sample(), {ID: NewID(time.Now()), Kind: Working, Created: time.Now().UTC(), Text: "x"}} {
		b := m.Encode()
		got, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(%q): %v", b, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := string(sample().Encode())
	for _, c := range []struct{ in, want string }{
		{"hello", "line 1"},
		{strings.Replace(good, "kind: episodic", "kind: dream", 1), "kind \"dream\""},
		{strings.Replace(good, "id: ", "idx: ", 1), "line 2: unknown"},
		{strings.Replace(good, "\n---\n", "\n", 1), "line 9: want \"key: value\""},
		{"---\nid: x\n", "not closed"},
		{strings.Replace(good, "tags: [nginx, disk]", "tags: [Nginx]", 1), "tag \"Nginx\""},
		{strings.Replace(good, "importance: 0.5", "importance: 0.50", 1), "canonical"},
		{strings.Replace(good, "importance: 0.5", "importance: 2", 1), "importance 2"},
	} {
		_, err := Parse([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%.60q) = %v, want error containing %q", c.in, err, c.want)
		}
	}
}

func TestIDs(t *testing.T) {
	now := time.Now()
	ids := make([]string, 10000)
	seen := map[string]bool{}
	for i := range ids {
		ids[i] = NewID(now)
		if err := CheckID(ids[i]); err != nil {
			t.Fatal(err)
		}
		if seen[ids[i]] {
			t.Fatalf("duplicate id %s", ids[i])
		}
		seen[ids[i]] = true
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids of one millisecond do not sort in creation order")
	}
	later := NewID(now.Add(time.Second))
	if later <= ids[len(ids)-1] {
		t.Fatalf("later id %s sorts before %s", later, ids[len(ids)-1])
	}
	if got := IDTime(later); got.UnixMilli() != now.Add(time.Second).UnixMilli() {
		t.Fatalf("IDTime = %v, want %v", got, now.Add(time.Second))
	}
	if kind, id, ok := SplitKey("semantic/" + later + ".md"); !ok || kind != Semantic || id != later {
		t.Fatalf("SplitKey: %q %q %v", kind, id, ok)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(sample().Encode())
	f.Add([]byte("---\nid: 01JD3XQ4R6ZP1V3W5KQ8M2N7TB\nkind: working\ncreated: 2026-01-01T00:00:00Z\n---\nhi"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		// Whatever parses encodes back to the same bytes and parses again
		// to the same memory.
		out := m.Encode()
		if string(out) != string(b) {
			t.Fatalf("Encode(Parse(%q)) = %q", b, out)
		}
		m2, err := Parse(out)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("second parse: %v, %+v vs %+v", err, m2, m)
		}
	})
}
