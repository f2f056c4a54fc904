package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the fixtures in testdata/ (go test -run TestGenFixtures -args -update)")

// fixtures are small logs in testdata/, each deliberately broken one way,
// with what Verify and Open must make of them. Open checks only the end of
// the log against the head: a change in the middle that keeps every byte
// offset (changed-byte, reordered) is Verify's to find, not Open's.
var fixtures = []struct {
	name     string
	ok       bool   // Verify's verdict
	firstBad uint64 // Verify's FirstBad
	problem  string // in Verify's Problem
	open     string // "ok", "recovered" (opens, Recovered set, then verifies) or "tampered" (ErrTampered)
}{
	{"ok", true, 0, "", "ok"},
	{"changed-byte", false, 5, "seg-0000000000000001.jsonl:5: entry 5: the hash does not match", "ok"},
	{"deleted-entry", false, 5, "seg-0000000000000001.jsonl:5: entry 5 is expected, entry 6 is here", "tampered"},
	{"reordered", false, 5, "seg-0000000000000001.jsonl:5: entry 5 is expected, entry 6 is here", "ok"},
	{"truncated-tail", false, 11, "the log ends at entry 10, but the head", "tampered"},
	// A forged entry 5 that links to entry 4 and carries a correct hash: the
	// real entry 5 after it no longer fits.
	{"inserted-forged", false, 6, "seg-0000000000000001.jsonl:6: entry 6 is expected, entry 5 is here", "tampered"},
	// A forged entry with a correct hash of its own bytes but a made-up prev.
	{"inserted-bad-link", false, 5, "seg-0000000000000001.jsonl:5: entry 5: prev does not match the hash of entry 4", "tampered"},
	// Entry 5 changed and every entry after it re-hashed: the chain links,
	// only the head shows it.
	{"rehashed-suffix", false, 12, "entry 12 has hash", "tampered"},
	// Entries 5.. renumbered 6.. and re-hashed.
	{"seq-gap", false, 5, "entry 5 is expected, entry 6 is here", "tampered"},
	{"removed-segment", false, 6, "seg-0000000000000011.jsonl: entries 6..10 are missing", "ok"},
	{"torn-tail", true, 0, "", "recovered"},
	{"torn-head-slot", true, 0, "", "recovered"},
	{"head-missing", false, 0, "head file is missing", "tampered"},
}

func TestFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			src := filepath.Join("testdata", fx.name)
			rep, err := Verify(src)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if rep.OK != fx.ok || rep.FirstBad != fx.firstBad || !strings.Contains(rep.Problem, fx.problem) {
				t.Errorf("Verify = OK %v, first bad %d, problem %q; want %v, %d, %q", rep.OK, rep.FirstBad, rep.Problem, fx.ok, fx.firstBad, fx.problem)
			}
			dir := copyDir(t, src)
			l, err := Open(dir, Options{})
			switch {
			case fx.open == "tampered":
				if !errors.Is(err, ErrTampered) {
					t.Fatalf("Open = %v, want ErrTampered", err)
				}
				return
			case err != nil:
				t.Fatalf("Open: %v", err)
			case (fx.open == "recovered") != (l.Recovered != ""):
				t.Errorf("Open: Recovered = %q, want %s", l.Recovered, fx.open)
			}
			appendSync(t, l, 3, 3)
			l.Close()
			if rep2, _ := Verify(dir); rep2.OK != fx.ok || rep2.FirstBad != fx.firstBad || (fx.ok && rep2.Note != "") {
				t.Errorf("Verify after Open and 3 appends = %+v, want as before", rep2)
			}
		})
	}
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestGenFixtures writes testdata/ anew. The logs are deterministic (fixed
// times), so regenerating changes nothing unless the format changed.
func TestGenFixtures(t *testing.T) {
	if !*update {
		t.Skip("run with -args -update to rewrite testdata/")
	}
	const n = 12
	base := func(segBytes int64) string {
		dir := t.TempDir()
		l := open(t, dir, Options{SegmentBytes: segBytes})
		for i := 1; i <= n; i++ {
			if err := l.Append([]*Entry{fixtureEntry(i)}); err != nil {
				t.Fatal(err)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	seg1 := segName(1)
	// edit rewrites the lines of the first segment.
	edit := func(name string, fn func(lines [][]byte) [][]byte) {
		dir := base(0)
		p := filepath.Join(dir, seg1)
		b, _ := os.ReadFile(p)
		lines := bytes.SplitAfter(b, []byte("\n"))
		lines = fn(lines[:len(lines)-1])
		os.Chmod(p, 0o600)
		if err := os.WriteFile(p, bytes.Join(lines, nil), 0o600); err != nil {
			t.Fatal(err)
		}
		save(t, dir, name)
	}
	save(t, base(0), "ok")
	edit("changed-byte", func(ls [][]byte) [][]byte {
		ls[4] = bytes.Replace(ls[4], []byte(`"result":"ok"`), []byte(`"result":"oK"`), 1)
		return ls
	})
	edit("deleted-entry", func(ls [][]byte) [][]byte { return append(ls[:4:4], ls[5:]...) })
	edit("reordered", func(ls [][]byte) [][]byte {
		ls[4], ls[5] = ls[5], ls[4]
		return ls
	})
	edit("truncated-tail", func(ls [][]byte) [][]byte { return ls[:10] })
	edit("inserted-forged", func(ls [][]byte) [][]byte {
		e := parseEntry(t, ls[4])
		e.Target = "ops:notes/forged.md"
		return append(ls[:4:4], append([][]byte{forge(t, e, e.Prev)}, ls[4:]...)...)
	})
	edit("inserted-bad-link", func(ls [][]byte) [][]byte {
		e := parseEntry(t, ls[4])
		e.Target = "ops:notes/forged.md"
		return append(ls[:4:4], append([][]byte{forge(t, e, strings.Repeat("5a", 32))}, ls[4:]...)...)
	})
	edit("rehashed-suffix", func(ls [][]byte) [][]byte {
		prev := parseEntry(t, ls[4]).Prev
		for i := 4; i < len(ls); i++ {
			e := parseEntry(t, ls[i])
			if i == 4 {
				e.Result = "EPERM"
			}
			ls[i] = forge(t, e, prev)
			prev = parseEntry(t, ls[i]).Hash
		}
		return ls
	})
	edit("seq-gap", func(ls [][]byte) [][]byte {
		prev := parseEntry(t, ls[4]).Prev
		for i := 4; i < len(ls); i++ {
			e := parseEntry(t, ls[i])
			e.Seq++
			ls[i] = forge(t, e, prev)
			prev = parseEntry(t, ls[i]).Hash
		}
		return ls
	})
	{
		dir := base(2200) // lines are about 415 bytes: 5 fit, 6 do not
		segs, _ := listSegments(dir)
		if len(segs) < 3 || segs[1] != 6 {
			t.Fatalf("removed-segment: segments %v, want 5 entries each", segs)
		}
		os.Remove(filepath.Join(dir, segName(segs[1])))
		save(t, dir, "removed-segment")
	}
	{
		dir := base(0)
		torn := forge(t, fixtureEntry(n+1), strings.Repeat("0", 64))
		f, _ := os.OpenFile(filepath.Join(dir, seg1), os.O_WRONLY|os.O_APPEND, 0)
		f.Write(torn[:len(torn)/2])
		f.Close()
		save(t, dir, "torn-tail")
	}
	{
		dir := base(0)
		p := filepath.Join(dir, headName)
		b, _ := os.ReadFile(p)
		hs, err := parseHead(b)
		if err != nil {
			t.Fatal(err)
		}
		// A write of the newest slot that stopped half way.
		half := hs.best*headSlotSize + headSlotSize/2
		copy(b[half:], bytes.Repeat([]byte{0}, headSlotSize/2))
		os.WriteFile(p, b, 0o600)
		save(t, dir, "torn-head-slot")
	}
	{
		dir := base(0)
		os.Remove(filepath.Join(dir, headName))
		save(t, dir, "head-missing")
	}
}

func fixtureEntry(i int) *Entry {
	ops := []string{"state.save", "state.delete", "memory.remember", "agent.spawn", "policy.check"}
	results := []string{"ok", "ok", "ok", "ENOENT", "EPERM"}
	return &Entry{
		Seq:    uint64(i),
		Time:   time.Date(2025, 6, 1, 12, 0, i, i*1234567, time.UTC),
		Actor:  Actor{UID: 1000, PID: int32(4000 + i), Agent: "ops", Run: fmt.Sprintf("r-%04d", i%3)},
		Op:     ops[i%len(ops)],
		Target: fmt.Sprintf("ops:notes/day-%d.md", i),
		Args:   ArgsDigest([]byte(fmt.Sprintf(`{"key":"notes/day-%d.md"}`, i))),
		Result: results[i%len(results)],
	}
}

func parseEntry(t *testing.T, line []byte) *Entry {
	t.Helper()
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

// forge renders e (keeping its Seq) as a line linked to prev with a
// correct hash: what an attacker who knows the format can write.
func forge(t *testing.T, e *Entry, prev string) []byte {
	t.Helper()
	var raw [32]byte
	if !decodeHex(&raw, []byte(prev)) {
		t.Fatalf("forge: bad prev %q", prev)
	}
	b := appendBody(nil, e, &raw)
	sum, _ := hashLine(nil, &raw, b)
	return fmt.Appendf(b, `%s%x"}`+"\n", hashKey, sum)
}

// save replaces testdata/name with the files of dir.
func save(t *testing.T, dir, name string) {
	t.Helper()
	dst := filepath.Join("testdata", name)
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
