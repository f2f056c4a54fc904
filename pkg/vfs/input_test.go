package vfs

import (
	"strings"
	"testing"
	"time"
)

func TestMemInput(t *testing.T) {
	for _, c := range []struct {
		in, text, tags, source, ttl string
		importance                  float64
		bad                         bool
	}{
		{in: "plain text\n", text: "plain text"},
		{in: "two\nlines\n\n", text: "two\nlines"},
		{in: "---\ntags: [a, b]\nimportance: 0.5\nttl: 2h\n---\nbody\n", text: "body", tags: "a,b", importance: 0.5, ttl: "2h"},
		{in: "---\nttl: 1m\ntags: x,y\nsource: cron\n---\nbody", text: "body", tags: "x,y", source: "cron", ttl: "1m"},
		// A memory's own file: id, kind and created are the kernel's.
		{in: "---\nid: 01JD3XQ4R6ZP1V3W5KQ8M2N7TB\nkind: episodic\ntags: [nginx]\ncreated: 2026-11-22T02:36:48Z\n---\ndisk full", text: "disk full", tags: "nginx"},
		{in: "--- not front matter\n", text: "--- not front matter"},
		{in: "---\ntags: [a]\nno end\n", bad: true},
		{in: "---\ncolour: red\n---\nx", bad: true},
		{in: "---\nimportance: lots\n---\nx", bad: true},
		{in: "---\nexpires: 2000-01-01T00:00:00Z\n---\nx", bad: true},
		{in: "---\nnot a pair\n---\nx", bad: true},
	} {
		got, err := MemInput([]byte(c.in))
		if c.bad {
			if err == nil {
				t.Errorf("%q: no error", c.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got.Text != c.text || strings.Join(got.Tags, ",") != c.tags || got.Source != c.source || got.TTL != c.ttl || got.Importance != c.importance {
			t.Errorf("%q: %+v", c.in, got)
		}
	}
	// expires becomes a ttl from now.
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	got, err := MemInput([]byte("---\nexpires: " + exp + "\n---\nx"))
	if d, perr := time.ParseDuration(got.TTL); err != nil || perr != nil || d < 58*time.Minute || d > time.Hour {
		t.Fatalf("expires in an hour: ttl %q, %v", got.TTL, err)
	}
}

// FuzzMemInput: what a file written into a kind's folder may hold is
// anything; it parses or is refused, and never panics.
func FuzzMemInput(f *testing.F) {
	f.Add([]byte("---\ntags: [a, b]\nimportance: 0.5\nttl: 2h\n---\nbody\n"))
	f.Add([]byte("plain"))
	f.Add([]byte("---\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := MemInput(b)
		if err == nil && strings.HasSuffix(in.Text, "\n") {
			t.Fatalf("text keeps a trailing newline: %q", in.Text)
		}
	})
}
